package otlp

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// What one span keeps at most, as the OpenTelemetry SDK's defaults: the
// rest is counted as dropped.
const (
	maxAttributes      = 128
	maxEvents          = 128
	maxLinks           = 128
	maxEventAttributes = 128
)

// sampler decides whether a span is recorded and exported
// (OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG).
type sampler struct {
	// parentBased: a span with a parent follows the parent's decision.
	parentBased bool
	// bound: a root span is sampled when the top 63 bits of the low half of
	// its trace ID are below it; 1<<63 samples all, 0 none.
	bound uint64
}

func (s sampler) sampled(parent trace.SpanContext, id trace.TraceID) bool {
	if s.parentBased && parent.IsValid() {
		return parent.IsSampled()
	}
	return binary.BigEndian.Uint64(id[8:])>>1 < s.bound
}

func parseSampler(getenv func(string) string) (sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (uint64, error) {
		if arg == "" {
			return 1 << 63, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: give the fraction of traces to sample, from 0 to 1", arg)
		}
		if f >= 1 {
			return 1 << 63, nil
		}
		return uint64(f * (1 << 63)), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sampler{parentBased: true, bound: 1 << 63}, nil
	case "always_on":
		return sampler{bound: 1 << 63}, nil
	case "always_off":
		return sampler{}, nil
	case "parentbased_always_off":
		return sampler{parentBased: true}, nil
	case "traceidratio", "parentbased_traceidratio":
		b, err := ratio()
		return sampler{parentBased: name != "traceidratio", bound: b}, err
	}
	return sampler{}, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: set it to always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio", name)
}

// scope is an instrumentation scope: what Tracer was asked for.
type scope struct {
	name, version, schemaURL string
	attrs                    []attribute.KeyValue
}

type scopeKey struct {
	name, version, schemaURL string
	attrs                    attribute.Distinct
}

// tracer starts the spans of one scope.
type tracer struct {
	embedded.Tracer
	e     *exporter
	scope scope
}

// newID is a new random, non-zero 64-bit ID (math/rand/v2's generator:
// per-thread state, no lock, seeded from the system's entropy).
func newID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// Start starts a span: a child of the span ctx carries (unless
// trace.WithNewRoot), recorded and exported when the sampler samples it,
// else a span that records nothing but carries its context to children.
func (t *tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	var parent trace.SpanContext
	if !cfg.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	sc := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()}
	if !parent.IsValid() {
		binary.BigEndian.PutUint64(sc.TraceID[:8], newID())
		binary.BigEndian.PutUint64(sc.TraceID[8:], rand.Uint64())
		sc.TraceFlags = 0
	}
	binary.BigEndian.PutUint64(sc.SpanID[:], newID())
	sampled := t.e.sampler.sampled(parent, sc.TraceID)
	sc.TraceFlags = sc.TraceFlags.WithSampled(sampled)
	if !sampled {
		u := &unsampled{sc: trace.NewSpanContext(sc), e: t.e}
		return trace.ContextWithSpan(ctx, u), u
	}
	s := &span{t: t, sc: trace.NewSpanContext(sc), name: name, kind: cfg.SpanKind()}
	if parent.IsValid() {
		s.parent = parent
	}
	if s.kind == trace.SpanKindUnspecified {
		s.kind = trace.SpanKindInternal
	}
	start := cfg.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s.start = start.UnixNano()
	s.attrs, s.droppedAttrs = setAttributes(s.inline[:0], cfg.Attributes(), maxAttributes)
	for _, l := range cfg.Links() {
		s.addLink(l)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// setAttributes sets kvs into attrs (a later value of a key replacing an
// earlier one), keeping at most limit, and returns them and how many
// were dropped.
func setAttributes(attrs, kvs []attribute.KeyValue, limit int) ([]attribute.KeyValue, int) {
	dropped := 0
next:
	for _, kv := range kvs {
		if !kv.Valid() {
			continue
		}
		for i := range attrs {
			if attrs[i].Key == kv.Key {
				attrs[i] = kv
				continue next
			}
		}
		if len(attrs) >= limit {
			dropped++
			continue
		}
		attrs = append(attrs, kv)
	}
	return attrs, dropped
}

// event is what AddEvent and RecordError add to a span.
type event struct {
	name    string
	time    int64 // Unix nanoseconds
	attrs   []attribute.KeyValue
	dropped int
}

// link is a link to another span.
type link struct {
	sc      trace.SpanContext
	attrs   []attribute.KeyValue
	dropped int
}

// span is a span that records: what is set on it until End, when it goes
// to the exporter's queue. Its methods are safe to call concurrently;
// after End they do nothing.
type span struct {
	embedded.Span
	t          *tracer
	sc, parent trace.SpanContext
	kind       trace.SpanKind
	start      int64 // Unix nanoseconds

	mu            sync.Mutex
	ended         bool
	end           int64
	name          string
	attrs         []attribute.KeyValue
	droppedAttrs  int
	events        []event
	droppedEvents int
	links         []link
	droppedLinks  int
	status        codes.Code
	statusMessage string

	// inline holds the first attributes: a reconcile span's, and those
	// set before it ends, without an allocation of their own.
	inline [8]attribute.KeyValue
}

var _ trace.Span = (*span)(nil)

// End ends the span and queues it for export.
func (s *span) End(opts ...trace.SpanEndOption) {
	var end time.Time
	if len(opts) > 0 {
		cfg := trace.NewSpanEndConfig(opts...)
		end = cfg.Timestamp()
	}
	if end.IsZero() {
		end = time.Now()
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.end = end.UnixNano()
	s.mu.Unlock()
	s.t.e.q.add(s)
}

func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	s.addEvent(name, cfg)
}

func (s *span) addEvent(name string, cfg trace.EventConfig) {
	at := cfg.Timestamp()
	if at.IsZero() {
		at = time.Now()
	}
	ev := event{name: name, time: at.UnixNano()}
	ev.attrs, ev.dropped = setAttributes(nil, cfg.Attributes(), maxEventAttributes)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if len(s.events) >= maxEvents {
		s.droppedEvents++
		return
	}
	s.events = append(s.events, ev)
}

func (s *span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addLink(l)
	}
}

func (s *span) addLink(l trace.Link) {
	if !l.SpanContext.IsValid() {
		return
	}
	if len(s.links) >= maxLinks {
		s.droppedLinks++
		return
	}
	k := link{sc: l.SpanContext}
	k.attrs, k.dropped = setAttributes(nil, l.Attributes, maxEventAttributes)
	s.links = append(s.links, k)
}

func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// RecordError adds an "exception" event: the error's type and message,
// and its stack with trace.WithStackTrace(true).
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil || !s.IsRecording() {
		return
	}
	opts = append(opts, trace.WithAttributes(
		attribute.String("exception.type", typeName(err)),
		attribute.String("exception.message", err.Error())))
	cfg := trace.NewEventConfig(opts...)
	if cfg.StackTrace() {
		buf := make([]byte, 4096)
		buf = buf[:runtime.Stack(buf, false)]
		cfg = trace.NewEventConfig(append(opts, trace.WithAttributes(attribute.String("exception.stacktrace", string(buf))))...)
	}
	s.addEvent("exception", cfg)
}

// typeName is err's type with its package path, as OpenTelemetry's
// exception.type names it.
func typeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String() // such as *errors.errorString
	}
	return t.PkgPath() + "." + t.Name()
}

func (s *span) SpanContext() trace.SpanContext { return s.sc }

// SetStatus sets the status: Ok is final, Error keeps its description,
// Unset is ignored.
func (s *span) SetStatus(code codes.Code, description string) {
	if code == codes.Unset {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.status == codes.Ok {
		return
	}
	s.status, s.statusMessage = code, ""
	if code == codes.Error {
		s.statusMessage = description
	}
}

func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	var dropped int
	s.attrs, dropped = setAttributes(s.attrs, kv, maxAttributes)
	s.droppedAttrs += dropped
}

func (s *span) TracerProvider() trace.TracerProvider { return s.t.e }

// unsampled is a span the sampler did not sample: it records nothing, and
// carries its context (its trace, its ID, not sampled) to its children.
type unsampled struct {
	embedded.Span
	sc trace.SpanContext
	e  *exporter
}

func (u *unsampled) End(...trace.SpanEndOption)              {}
func (u *unsampled) AddEvent(string, ...trace.EventOption)   {}
func (u *unsampled) AddLink(trace.Link)                      {}
func (u *unsampled) IsRecording() bool                       { return false }
func (u *unsampled) RecordError(error, ...trace.EventOption) {}
func (u *unsampled) SpanContext() trace.SpanContext          { return u.sc }
func (u *unsampled) SetStatus(codes.Code, string)            {}
func (u *unsampled) SetName(string)                          {}
func (u *unsampled) SetAttributes(...attribute.KeyValue)     {}
func (u *unsampled) TracerProvider() trace.TracerProvider    { return u.e }
