package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/internal/tracing"
	"github.com/kloop-dev/kloop/metrics"
)

// config is what New takes from the App's Options, and the environment.
type config struct {
	endpoint, service string
	logger            *slog.Logger
	registerer        prometheus.Registerer
	getenv            func(string) string
}

// exporter is kloop's TracerProvider: its spans are recorded as compact
// structs that, at End, go to a bounded queue, whose goroutine encodes
// them in batches as OTLP protobuf and posts them to the receiver. The
// queue's goroutine starts with the first span that ends; Shutdown sends
// what is queued and stops it.
type exporter struct {
	embedded.TracerProvider
	q       *queue
	sampler sampler

	mu      sync.Mutex
	tracers map[scopeKey]*tracer
}

// tracesURL is where spans for endpoint go. An endpoint without a path is
// the receiver's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: its traces
// path is /v1/traces (the OTLP exporter would post to "/" otherwise). An
// endpoint with a path is used as it is, as
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

// New returns the trace exporter for an App made with opts, to set as its
// Options.Traces, when endpoint or the OTEL_* environment asks for traces,
// or nil when neither does; it returns an error for a setting it cannot
// honour, saying what to set. It does no I/O and starts no goroutine (the
// queue's starts with the first span that ends; the App's Run shuts it
// down when it stops, sending the spans still queued).
//
// The spans' service.name is opts.Name (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it), the kloop_trace_* metrics go to
// opts.Registry (default kloop's, metrics.Registry, as the App's), and a
// failed export is logged (one line a minute) to opts.Logger.
//
// endpoint, if not "", is an OTLP/HTTP URL (such as
// http://127.0.0.1:4318) that turns tracing on whatever the environment
// says: a URL without a path is the receiver's base URL and spans go to
// its /v1/traces, as with OTEL_EXPORTER_OTLP_ENDPOINT; a URL with a path
// is used as it is. Without it, traces are on when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// or OTEL_TRACES_EXPORTER=otlp, unless OTEL_TRACES_EXPORTER=none or
// OTEL_SDK_DISABLED=true. The exporter reads the other
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates), the sampler OTEL_TRACES_SAMPLER and its
// OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on: every span
// whose parent, if any, was sampled),
// the queue OTEL_BSP_MAX_QUEUE_SIZE (2048 spans),
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_SCHEDULE_DELAY and
// OTEL_BSP_EXPORT_TIMEOUT. A span that ends with the queue full, or in a
// batch the receiver does not take, is dropped and counted in
// kloop_trace_spans_dropped_total: a slow or unreachable receiver never
// makes a reconcile wait.
func New(opts kloop.Options, endpoint string) (trace.TracerProvider, error) {
	cfg := config{endpoint: endpoint, service: opts.Name, logger: opts.Logger, getenv: os.Getenv}
	if opts.Registry != nil { // else metrics.Registry, not a nil *Registry
		cfg.registerer = opts.Registry
	}
	e, err := newExporter(cfg)
	if e == nil {
		return nil, err // a nil interface, not a nil *exporter
	}
	return e, err
}

func newExporter(cfg config) (*exporter, error) {
	getenv := cfg.getenv
	on, err := tracing.Enabled(cfg.endpoint, getenv)
	if err != nil || !on {
		return nil, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.registerer == nil {
		cfg.registerer = metrics.Registry
	}
	snd, err := newSender(cfg.endpoint, getenv)
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	smp, err := parseSampler(getenv)
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	qo, err := queueOptions(getenv)
	if err != nil {
		return nil, err
	}
	q, err := newQueue(snd, resourceAttributes(cfg.service, getenv), qo, cfg.logger, cfg.registerer)
	if err != nil {
		return nil, err
	}
	return &exporter{q: q, sampler: smp, tracers: map[scopeKey]*tracer{}}, nil
}

// resourceAttributes describe the program, in the order of their keys:
// OTEL_RESOURCE_ATTRIBUTES, telemetry.sdk.*, and service.name, which is
// OTEL_SERVICE_NAME, else the one in OTEL_RESOURCE_ATTRIBUTES, else name,
// else unknown_service:<program> as the specification says.
func resourceAttributes(name string, getenv func(string) string) []attribute.KeyValue {
	attrs := map[attribute.Key]string{
		"service.name":           name,
		"telemetry.sdk.name":     "kloop",
		"telemetry.sdk.language": "go",
		"telemetry.sdk.version":  kloopVersion(),
	}
	for kv := range strings.SplitSeq(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		v, err := url.PathUnescape(strings.TrimSpace(v))
		if !ok || k == "" || err != nil {
			continue // as the SDK does: a malformed pair is skipped
		}
		attrs[attribute.Key(k)] = v
	}
	if v := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); v != "" {
		attrs["service.name"] = v
	}
	if attrs["service.name"] == "" {
		attrs["service.name"] = "unknown_service:" + filepath.Base(os.Args[0])
	}
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		kvs = append(kvs, k.String(attrs[k]))
	}
	return kvs
}

// kloopVersion is the version of kloop's module in the program's build
// information, if it has one.
func kloopVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == "github.com/kloop-dev/kloop" {
			return bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/kloop-dev/kloop" {
				return d.Version
			}
		}
	}
	return "(devel)"
}

// Tracer is a tracer whose spans go to the receiver.
// Asked again for the same scope, it returns the same tracer.
func (e *exporter) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	cfg := trace.NewTracerConfig(opts...)
	attrs := cfg.InstrumentationAttributes()
	k := scopeKey{name: name, version: cfg.InstrumentationVersion(), schemaURL: cfg.SchemaURL(), attrs: attrs.Equivalent()}
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.tracers[k]
	if !ok {
		t = &tracer{e: e, scope: scope{name: name, version: k.version, schemaURL: k.schemaURL, attrs: attrs.ToSlice()}}
		e.tracers[k] = t
	}
	return t
}

// post sends body, and sends it again while the receiver answers that it
// may take it later (429, 502, 503, 504: see refused), waiting as it says
// or backing off from one second, doubled each time up to eight, within
// the export timeout (OTEL_BSP_EXPORT_TIMEOUT). Once Shutdown has begun, a
// refused request is not sent again.
func (q *queue) post(ctx context.Context, body []byte) error {
	backoff := time.Second
	for {
		err := q.snd.post(ctx, body)
		var r *refused
		if !errors.As(err, &r) {
			return err
		}
		wait := backoff
		if r.after >= 0 {
			wait = r.after
		} else {
			backoff = min(2*backoff, 8*time.Second)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err // the receiver would not be asked again in time
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-q.stop:
			t.Stop()
			return err
		}
	}
}

// ForceFlush exports what is queued now, or gives up when ctx is done.
func (e *exporter) ForceFlush(ctx context.Context) error { return e.q.ForceFlush(ctx) }

// Shutdown exports what is queued, within ctx, and stops. Spans that end
// after it are dropped.
func (e *exporter) Shutdown(ctx context.Context) error { return e.q.Shutdown(ctx) }

// queueOpts bound the queue: the OTEL_BSP_* variables of the SDK's
// batch span processor, with its defaults.
type queueOpts struct {
	size, batch   int
	delay, export time.Duration
}

func queueOptions(getenv func(string) string) (queueOpts, error) {
	o := queueOpts{size: 2048, batch: 512, delay: 5 * time.Second, export: 30 * time.Second}
	var errs []error
	num := func(name string, into *int) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: give a positive whole number", name, v))
			return
		}
		*into = n
	}
	ms := func(name string, into *time.Duration) {
		n := -1
		num(name, &n)
		if n > 0 {
			*into = time.Duration(n) * time.Millisecond
		}
	}
	num("OTEL_BSP_MAX_QUEUE_SIZE", &o.size)
	num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &o.batch)
	ms("OTEL_BSP_SCHEDULE_DELAY", &o.delay)
	ms("OTEL_BSP_EXPORT_TIMEOUT", &o.export)
	o.batch = min(o.batch, o.size)
	return o, errors.Join(errs...)
}

// queue is the bounded queue between spans that end and the receiver,
// like the SDK's batch span processor, whose drops are counted in
// kloop_trace_spans_dropped_total: a span that ends when the queue is
// full is dropped at once, never waited for, and a batch the receiver
// does not take (down, unreachable or silent past
// OTEL_BSP_EXPORT_TIMEOUT) is dropped too.
//
// A span that ends is appended under a mutex; the goroutine is woken
// only when a batch is full, on the schedule, on ForceFlush and at
// Shutdown, not for each span.
type queue struct {
	snd  *sender
	enc  encoder
	o    queueOpts
	log  *slog.Logger
	full prometheus.Counter
	fail prometheus.Counter
	sent prometheus.Counter

	mu      sync.Mutex
	pending []*span // at most o.size
	closed  bool    // after Shutdown: spans are dropped
	ready   chan struct{}

	startOnce sync.Once
	flush     chan chan struct{}
	stop      chan struct{}
	stopped   chan struct{}
	stopOnce  sync.Once
	// lastWarn is when a failed export was last logged (one a minute).
	lastWarn time.Time
}

func newQueue(snd *sender, resource []attribute.KeyValue, o queueOpts, log *slog.Logger, reg prometheus.Registerer) (*queue, error) {
	r := kmetrics.NewRegistrar(reg)
	dropped := r.CounterVec(prometheus.CounterOpts{Name: "kloop_trace_spans_dropped_total",
		Help: "Spans not exported: reason queue_full (ended while OTEL_BSP_MAX_QUEUE_SIZE spans waited) or export_failed (the OTLP receiver did not take their batch)"}, "reason")
	sent := r.CounterVec(prometheus.CounterOpts{Name: "kloop_trace_spans_exported_total", Help: "Spans the OTLP receiver took"})
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("traces: registering metrics: %w", err)
	}
	return &queue{
		snd: snd, enc: encoder{resource: resource}, o: o, log: log,
		full: dropped.WithLabelValues("queue_full"), fail: dropped.WithLabelValues("export_failed"),
		sent:    sent.WithLabelValues(),
		pending: make([]*span, 0, o.size),
		ready:   make(chan struct{}, 1),
		flush:   make(chan chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{}),
	}, nil
}

// add queues s, or drops it when the queue is full: it never waits. A
// span that ends after Shutdown is dropped uncounted.
func (q *queue) add(s *span) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if len(q.pending) >= q.o.size {
		q.mu.Unlock()
		q.full.Inc()
		return
	}
	q.pending = append(q.pending, s)
	n := len(q.pending)
	q.mu.Unlock()
	q.start()
	if n%q.o.batch == 0 {
		select {
		case q.ready <- struct{}{}:
		default: // already woken
		}
	}
}

func (q *queue) start() { q.startOnce.Do(func() { go q.run() }) }

// run sends batches: when one is full, every OTEL_BSP_SCHEDULE_DELAY, on
// ForceFlush, and what is left at Shutdown.
func (q *queue) run() {
	defer close(q.stopped)
	tick := time.NewTicker(q.o.delay)
	defer tick.Stop()
	spare := make([]*span, 0, q.o.size)
	for {
		select {
		case <-q.ready:
		case <-tick.C:
		case done := <-q.flush:
			spare = q.send(spare)
			close(done)
			continue
		case <-q.stop:
			q.send(spare)
			return
		}
		spare = q.send(spare)
	}
}

// send exports every span queued now, in batches, and returns the slice
// to take them into next time.
func (q *queue) send(into []*span) []*span {
	q.mu.Lock()
	spans := q.pending
	q.pending = into
	q.mu.Unlock()
	for b := range slices.Chunk(spans, q.o.batch) {
		q.export(b)
	}
	clear(spans)
	return spans[:0]
}

func (q *queue) export(batch []*span) {
	ctx, cancel := context.WithTimeout(context.Background(), q.o.export)
	defer cancel()
	if err := q.post(ctx, q.enc.request(batch)); err != nil {
		q.fail.Add(float64(len(batch)))
		if now := time.Now(); now.Sub(q.lastWarn) >= time.Minute {
			q.lastWarn = now
			q.log.Warn("Traces not exported; spans are dropped until the OTLP receiver answers (kloop_trace_spans_dropped_total)", "spans", len(batch), "err", err)
		}
		return
	}
	q.sent.Add(float64(len(batch)))
}

// ForceFlush exports what is queued now, or gives up when ctx is done.
func (q *queue) ForceFlush(ctx context.Context) error {
	q.start()
	done := make(chan struct{})
	select {
	case q.flush <- done:
	case <-q.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and stops, or gives up when ctx is
// done (the spans left are lost).
func (q *queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.start()
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	q.snd.close()
	return nil
}
