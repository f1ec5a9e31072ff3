package record

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/watcher"
)

// Event types, as kubectl shows them.
const (
	Normal  = corev1.EventTypeNormal
	Warning = corev1.EventTypeWarning
)

// Defaults of Options.
const (
	DefaultComponent    = "kloop"
	DefaultQueueSize    = 1000
	DefaultCacheSize    = 4096
	DefaultWriteTimeout = 10 * time.Second
	DefaultDrainTimeout = 5 * time.Second
	// An object's events are written at most DefaultObjectBurst at once,
	// then one per DefaultObjectRefill (client-go's event spam filter has
	// the same budget per object).
	DefaultObjectBurst  = 25
	DefaultObjectRefill = 5 * time.Minute
)

// MaxMessageLength is the longest message stored, in bytes; longer ones are
// cut at a character boundary (the events.k8s.io limit for a note).
const MaxMessageLength = 1024

// Limits of the Events API, which refuses an Event beyond them.
const (
	maxReasonLength   = 128 // reason and action
	maxInstanceLength = 128 // reportingInstance
)

// seriesWindow is how long a series stays open without a repeat: a repeat
// later than this after the last one starts a new Event, as the Events
// API's reference reporter in client-go finishes a series after 6 minutes
// without one.
const seriesWindow = 6 * time.Minute

// ErrAlreadyStarted is returned by Start when the recorder has been started
// before.
var ErrAlreadyStarted = errors.New("record: recorder already started")

// Options configure a Recorder. The zero value works.
type Options struct {
	// Component names the reporter: the Event's reportingController
	// ("From" in kubectl describe), and source.component where the
	// recorder falls back to core/v1. It must be a qualified name (such
	// as "foo-controller" or "example.com/foo"), as the Events API
	// requires. Default "kloop".
	Component string
	// Host names the reporting instance: reportingInstance (at most 128
	// bytes; longer is cut), and source.host on core/v1. Default:
	// Component.
	Host string

	// Scheme finds the apiVersion and kind of typed objects, whose
	// TypeMeta is usually empty. It must register the types of the objects
	// events are about, custom resources included. Objects that carry their
	// kind (such as *unstructured.Unstructured) need no registration.
	// Default: client-go's kubernetes/scheme.Scheme.
	Scheme *runtime.Scheme

	// QueueSize bounds the events waiting to be written. When it is full,
	// Event drops the new event and counts it instead of blocking the
	// caller. Default 1000.
	QueueSize int
	// CacheSize bounds how many distinct recent events are remembered for
	// aggregation (least recently seen are forgotten first). Default 4096.
	CacheSize int

	// ObjectBurst and ObjectRefill budget the writes about one object
	// (by UID): at most ObjectBurst at once, then one per ObjectRefill, so
	// that an object failing with a new message each time cannot flood
	// the Events API. A repeat over budget is not lost: it adds to its
	// series' count, written with the next repeat that is within budget;
	// a new event over budget is dropped and counted (reason
	// rate_limited). Defaults DefaultObjectBurst and DefaultObjectRefill.
	ObjectBurst  int
	ObjectRefill time.Duration

	// WriteTimeout bounds each request to the API server. Default 10s.
	WriteTimeout time.Duration
	// DrainTimeout bounds how long Start keeps writing queued events after
	// its context is done. Default 5s.
	DrainTimeout time.Duration

	// Clock stamps events. Default: the real clock.
	Clock clock.PassiveClock
	// Logger receives one line per recorded event (Info for Normal, Warn
	// for Warning) and write failures. Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the recorder's metrics. Default: the kloop
	// metrics registry.
	Registerer prometheus.Registerer
}

func (o *Options) defaults() error {
	if o.Component == "" {
		o.Component = DefaultComponent
	}
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.ObjectBurst == 0 {
		o.ObjectBurst = DefaultObjectBurst
	}
	if o.ObjectRefill == 0 {
		o.ObjectRefill = DefaultObjectRefill
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.QueueSize < 0 || o.CacheSize < 0 || o.WriteTimeout < 0 || o.DrainTimeout < 0 || o.ObjectBurst < 0 || o.ObjectRefill < 0 {
		return errors.New("record: QueueSize, CacheSize, ObjectBurst, ObjectRefill, WriteTimeout and DrainTimeout must not be negative")
	}
	if errs := validation.IsQualifiedName(o.Component); len(errs) > 0 {
		return fmt.Errorf("record: Component %q is not a qualified name, which the Events API requires of reportingController (for example \"foo-controller\" or \"example.com/foo\"): %s",
			o.Component, strings.Join(errs, "; "))
	}
	return nil
}

// instance is the reportingInstance: Host, or Component without one (the
// Events API requires one), cut to the API's limit.
func (o *Options) instance() string {
	in := o.Host
	if in == "" {
		in = o.Component
	}
	if len(in) > maxInstanceLength {
		in = in[:maxInstanceLength]
	}
	return in
}

// eventsSink is where events are written when the API server serves
// events.k8s.io/v1. client.Resource[*eventsv1.Event] is one.
type eventsSink interface {
	Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error)
	Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts client.PatchOptions) (*eventsv1.Event, error)
}

// coreSink is where events are written when the API server lacks
// events.k8s.io/v1: core/v1 Events. client.Resource[*corev1.Event] is one.
type coreSink interface {
	Create(ctx context.Context, ev *corev1.Event) (*corev1.Event, error)
	Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts client.PatchOptions) (*corev1.Event, error)
}

var (
	_ eventsSink = (*client.Resource[*eventsv1.Event])(nil)
	_ coreSink   = (*client.Resource[*corev1.Event])(nil)
)

// sinks are the two Event APIs and how Start chooses between them.
type sinks struct {
	events eventsSink
	core   coreSink
	// servesEvents reports whether the API server serves events.k8s.io/v1
	// Events: false, nil when it does not; an error when it could not be
	// told.
	servesEvents func(ctx context.Context) (bool, error)
}

// EventRecorder is what code that records events needs of a Recorder:
// a reconciler holding one can be given a Recorder in production and
// anything else (a recorder that drops or collects events) where Events
// are not wanted.
type EventRecorder interface {
	Event(obj watcher.Object, eventType, reason, message string)
}

var _ EventRecorder = (*Recorder)(nil)

// Recorder writes Events about objects, through events.k8s.io/v1 (core/v1
// where the API server lacks it). Event may be called from any goroutine
// and never blocks on the API server; Start writes the events.
type Recorder struct {
	opts    Options
	sinks   sinks
	metrics *recorderMetrics

	mu      sync.RWMutex // write-locked once, when Start stops accepting events
	stopped bool
	started atomic.Bool

	// The queue: events waiting for Start, at most QueueSize. It holds
	// memory only while events wait (Start takes the whole slice), rather
	// than a buffer of QueueSize events for the recorder's life.
	qmu    sync.Mutex
	queued []pending
	wake   chan struct{} // capacity 1: something was queued

	// Owned by Start's goroutine.
	core      bool  // writing core/v1 Events: the server lacks events.k8s.io/v1
	lastNamed int64 // the time in the name of the last Event created (see eventName)
	recent    *lru
	budgets   map[string]*budget // per object; see allow
	drainBy   time.Time          // when Start gives up writing after ctx ended
}

// pending is an event waiting in the queue: everything is copied out of the
// object when Event is called, so the caller may change it afterwards.
type pending struct {
	ref       corev1.ObjectReference
	eventType string
	reason    string
	message   string
	at        time.Time
}

// New returns a recorder writing to the API server cfg points at, with a
// client of its own. It starts nothing: call Start.
func New(cfg *rest.Config, opts Options) (*Recorder, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{FieldManager: opts.Component, DisableWriteTracking: true, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	events, err := client.NewResource[*eventsv1.Event](c, eventsv1.SchemeGroupVersion.WithResource("events"))
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	core, err := client.NewResource[*corev1.Event](c, corev1.SchemeGroupVersion.WithResource("events"))
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return newRecorder(sinks{events: events, core: core, servesEvents: func(ctx context.Context) (bool, error) {
		return servesEvents(ctx, dc)
	}}, opts)
}

// servesEvents reports whether the API server's discovery lists the
// events resource of events.k8s.io/v1.
func servesEvents(ctx context.Context, dc *discovery.DiscoveryClient) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersionWithContext(ctx, eventsv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "events" {
			return true, nil
		}
	}
	return false, nil
}

func newRecorder(s sinks, opts Options) (*Recorder, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	m, err := newRecorderMetrics(opts.Registerer, opts.Component)
	if err != nil {
		return nil, err
	}
	return &Recorder{
		opts:    opts,
		sinks:   s,
		metrics: m,
		wake:    make(chan struct{}, 1),
		recent:  newLRU(opts.CacheSize),
		budgets: map[string]*budget{},
	}, nil
}

// Event records an event of eventType (Normal or Warning) about obj, with a
// reason (a short UpperCamelCase word, such as "Synced") and a
// human-readable message. It logs the event and queues it for Start to
// write; when the queue is full, or the recorder has stopped, the event is
// dropped and counted. It never blocks on I/O.
func (r *Recorder) Event(obj watcher.Object, eventType, reason, message string) {
	if eventType != Normal && eventType != Warning {
		r.opts.Logger.Error("event dropped: type must be Normal or Warning", "type", eventType, "reason", reason)
		r.metrics.dropped(reasonInvalid)
		return
	}
	if reason == "" || len(reason) > maxReasonLength {
		r.opts.Logger.Error("event dropped: reason must be a short word such as \"Synced\", not empty and at most 128 bytes", "type", eventType, "reason", reason)
		r.metrics.dropped(reasonInvalid)
		return
	}
	ref, err := reference(r.opts.Scheme, obj)
	if err != nil {
		r.opts.Logger.Error("event dropped: no reference to the object", "err", err, "reason", reason)
		r.metrics.dropped(reasonInvalid)
		return
	}
	level := slog.LevelInfo
	if eventType == Warning {
		level = slog.LevelWarn
	}
	r.opts.Logger.Log(context.Background(), level, "event", "type", eventType, "reason", reason, "message", message,
		"kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name)

	p := pending{ref: ref, eventType: eventType, reason: reason, message: truncate(message), at: r.opts.Clock.Now()}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.stopped {
		r.metrics.dropped(reasonStopped)
		return
	}
	r.qmu.Lock()
	full := len(r.queued) >= r.opts.QueueSize
	if !full {
		r.queued = append(r.queued, p)
	}
	r.qmu.Unlock()
	if full {
		r.metrics.dropped(reasonQueueFull)
		r.opts.Logger.Debug("event dropped: queue full", "reason", reason, "namespace", ref.Namespace, "name", ref.Name)
		return
	}
	select {
	case r.wake <- struct{}{}:
	default: // Start is woken already
	}
}

// take empties the queue and returns what it held, oldest first.
func (r *Recorder) take() []pending {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	ps := r.queued
	r.queued = nil
	return ps
}

// Start writes queued events until ctx is done, then stops accepting events,
// writes those still queued (for at most DrainTimeout) and returns nil. It
// runs on the caller's goroutine and starts no other; it may be called
// once (ErrAlreadyStarted otherwise). Write failures are logged and counted,
// not returned.
func (r *Recorder) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	r.drainBy = time.Time{}
	r.chooseAPI(ctx)
	for {
		select {
		case <-r.wake:
			r.writeBatch(ctx, r.batch(r.take()))
		case <-ctx.Done():
			r.mu.Lock()
			r.stopped = true // no event is queued after this
			r.mu.Unlock()
			r.writeBatch(ctx, r.batch(r.take()))
			return nil
		}
	}
}

// chooseAPI decides, once, which Events API Start writes: events.k8s.io/v1
// unless discovery shows the server lacks it. When discovery fails the
// current API is assumed, as every supported Kubernetes version serves it.
func (r *Recorder) chooseAPI(ctx context.Context) {
	r.core = false
	dctx, cancel, ok := r.requestContext(ctx)
	if !ok {
		return
	}
	defer cancel()
	served, err := r.sinks.servesEvents(dctx)
	switch {
	case err != nil:
		r.opts.Logger.Warn("could not tell whether the API server serves events.k8s.io/v1; writing Events through it", "err", err)
	case !served:
		r.core = true
		r.opts.Logger.Info("the API server does not serve events.k8s.io/v1; writing core/v1 Events")
	}
}

// requestContext bounds one write: WriteTimeout, and once ctx is done, the
// drain deadline. Writes are not cut off the moment ctx ends, so that what
// was queued before still gets written. ok is false when the drain deadline
// has passed.
func (r *Recorder) requestContext(ctx context.Context) (_ context.Context, _ context.CancelFunc, ok bool) {
	now := time.Now()
	deadline := now.Add(r.opts.WriteTimeout)
	if ctx.Err() != nil {
		if r.drainBy.IsZero() {
			r.drainBy = now.Add(r.opts.DrainTimeout)
		}
		if !now.Before(r.drainBy) {
			return nil, nil, false
		}
		if r.drainBy.Before(deadline) {
			deadline = r.drainBy
		}
	}
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	return wctx, cancel, true
}

// aggregate is one distinct event with the number of times it was recorded
// in a batch.
type aggregate struct {
	pending
	n     int32
	first time.Time
}

// batch folds repeats of one event in ps into one aggregate, keeping the
// order of first appearance.
func (r *Recorder) batch(ps []pending) []*aggregate {
	var (
		out   []*aggregate
		byKey = map[eventKey]*aggregate{}
	)
	add := func(p pending) {
		k := keyOf(p)
		if a, ok := byKey[k]; ok {
			a.n++
			a.at = p.at
			return
		}
		a := &aggregate{pending: p, n: 1, first: p.at}
		byKey[k] = a
		out = append(out, a)
	}
	for _, p := range ps {
		add(p)
	}
	return out
}

func (r *Recorder) writeBatch(ctx context.Context, batch []*aggregate) {
	for _, a := range batch {
		r.write(ctx, a)
	}
}

// write records a in the API server: an update of the Event written before
// for the same event while it is remembered (and, on events.k8s.io/v1,
// while its series is open), a new Event otherwise.
func (r *Recorder) write(ctx context.Context, a *aggregate) {
	k := keyOf(a.pending)
	wctx, cancel, ok := r.requestContext(ctx)
	if !ok {
		r.metrics.dropped(reasonStopped)
		return
	}
	defer cancel()
	prev, ok := r.recent.get(k)
	repeat := ok && (r.core || a.first.Sub(prev.last) <= seriesWindow)
	if !r.allow(a.ref) {
		if repeat { // counted now, written with the next repeat within budget
			prev.count, prev.last = prev.count+a.n, a.at
			r.metrics.written(resultDeferred, int(a.n))
		} else {
			r.metrics.dropped(reasonRateLimited)
		}
		return
	}
	if repeat {
		count := prev.count + a.n
		err := r.repeat(wctx, prev, count, a.at)
		if err == nil {
			prev.count, prev.last = count, a.at
			r.metrics.written(resultAggregated, int(a.n))
			return
		}
		r.recent.remove(k)
		if !apierrors.IsNotFound(err) {
			r.metrics.written(resultFailed, int(a.n))
			r.opts.Logger.Error("could not update event", "err", err, "reason", a.reason, "namespace", a.ref.Namespace, "name", a.ref.Name)
			return
		}
		// The Event expired (Events live an hour by default): start anew.
	}
	ns := a.ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // where events about cluster-scoped objects go
	}
	var (
		w   written
		err error
	)
	if r.core {
		w, err = r.createCore(wctx, ns, a)
	} else {
		w, err = r.createEvent(wctx, ns, a)
	}
	if err != nil {
		r.metrics.written(resultFailed, int(a.n))
		r.opts.Logger.Error("could not create event", "err", err, "reason", a.reason, "namespace", a.ref.Namespace, "name", a.ref.Name)
		return
	}
	r.recent.put(k, w)
	r.metrics.written(resultCreated, int(a.n))
}

// createEvent writes a new events.k8s.io/v1 Event for a. Repeats folded
// into a make it a series from the start: the Events API counts the first
// occurrence in a series' count, so a series begins at 2.
func (r *Recorder) createEvent(ctx context.Context, ns string, a *aggregate) (written, error) {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: r.eventName(a.ref.Name, a.first)},
		EventTime:           metav1.NewMicroTime(a.first),
		ReportingController: r.opts.Component,
		ReportingInstance:   r.opts.instance(),
		Action:              a.reason, // Event takes no action; the reason says what happened
		Reason:              a.reason,
		Regarding:           a.ref,
		Note:                a.message,
		Type:                a.eventType,
	}
	if a.n > 1 {
		ev.Series = &eventsv1.EventSeries{Count: a.n, LastObservedTime: metav1.NewMicroTime(a.at)}
	}
	created, err := r.sinks.events.Create(ctx, ev)
	if err != nil {
		return written{}, err
	}
	return written{namespace: ns, name: created.Name, count: a.n, last: a.at}, nil
}

// createCore writes a new core/v1 Event for a, with its repeats in count.
func (r *Recorder) createCore(ctx context.Context, ns string, a *aggregate) (written, error) {
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: generateName(a.ref.Name)},
		InvolvedObject:      a.ref,
		Reason:              a.reason,
		Message:             a.message,
		Type:                a.eventType,
		Count:               a.n,
		FirstTimestamp:      metav1.NewTime(a.first),
		LastTimestamp:       metav1.NewTime(a.at),
		Source:              corev1.EventSource{Component: r.opts.Component, Host: r.opts.Host},
		ReportingController: r.opts.Component,
		ReportingInstance:   r.opts.Host,
	}
	created, err := r.sinks.core.Create(ctx, ev)
	if err != nil {
		return written{}, err
	}
	return written{namespace: ns, name: created.Name, count: a.n, last: a.at}, nil
}

// repeat moves the Event w to count occurrences, the last at last: its
// series on events.k8s.io/v1, its count and lastTimestamp on core/v1, by a
// merge patch of just those fields.
func (r *Recorder) repeat(ctx context.Context, w *written, count int32, last time.Time) error {
	if r.core {
		patch, _ := json.Marshal(struct {
			Count         int32       `json:"count"`
			LastTimestamp metav1.Time `json:"lastTimestamp"`
		}{count, metav1.NewTime(last)})
		_, err := r.sinks.core.Patch(ctx, w.namespace, w.name, types.MergePatchType, patch, client.PatchOptions{})
		return err
	}
	patch, _ := json.Marshal(struct {
		Series eventsv1.EventSeries `json:"series"`
	}{eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)}})
	_, err := r.sinks.events.Patch(ctx, w.namespace, w.name, types.MergePatchType, patch, client.PatchOptions{})
	return err
}

// generateName is the prefix the API server completes with a random suffix
// for a core/v1 Event: the object's name and a dot, as events are
// conventionally named.
func generateName(objName string) string {
	return dnsPrefix(objName, 253-6) + "."
}

// eventName names a new events.k8s.io/v1 Event, which the API refuses a
// generateName ending in a dot: the object's name, a dot and the time in
// hexadecimal nanoseconds, as Kubernetes names Events. The time is moved on
// past the last one named, so that the names this recorder gives are unique.
func (r *Recorder) eventName(objName string, at time.Time) string {
	n := at.UnixNano()
	if n <= r.lastNamed {
		n = r.lastNamed + 1
	}
	r.lastNamed = n
	suffix := "." + strconv.FormatUint(uint64(n), 16)
	return dnsPrefix(objName, 253-len(suffix)) + suffix
}

// dnsPrefix is objName made a DNS subdomain of at most max bytes, which the
// Events API requires of names and not every object's name is (an RBAC
// role's may hold a colon): other characters become '-', capitals lower
// case, and it begins and ends with a letter or digit ("event" if none is
// left).
func dnsPrefix(objName string, max int) string {
	if len(objName) > max {
		objName = objName[:max]
	}
	b := []byte(strings.ToLower(objName))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	name := strings.Trim(string(b), "-.")
	if name == "" {
		name = "event"
	}
	return name
}

// reference describes obj for involvedObject.
func reference(s *runtime.Scheme, obj watcher.Object) (corev1.ObjectReference, error) {
	if obj == nil {
		return corev1.ObjectReference{}, errors.New("nil object")
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		kinds, _, err := s.ObjectKinds(obj)
		if err != nil {
			return corev1.ObjectReference{}, fmt.Errorf("kind of %T: %w", obj, err)
		}
		gvk = kinds[0]
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return corev1.ObjectReference{
		APIVersion:      apiVersion,
		Kind:            kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
	}, nil
}

func truncate(msg string) string {
	if len(msg) <= MaxMessageLength {
		return msg
	}
	cut := MaxMessageLength
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// eventKey identifies repeats of one event. The object's resourceVersion is
// left out: an object that changed between repeats is still the same object.
type eventKey struct {
	apiVersion, kind, namespace, name string
	uid                               types.UID
	eventType, reason, message        string
}

func keyOf(p pending) eventKey {
	return eventKey{
		apiVersion: p.ref.APIVersion, kind: p.ref.Kind, namespace: p.ref.Namespace, name: p.ref.Name, uid: p.ref.UID,
		eventType: p.eventType, reason: p.reason, message: p.message,
	}
}

// written is an Event in the API server that repeats are added to.
type written struct {
	namespace, name string
	count           int32     // occurrences so far
	last            time.Time // of the latest occurrence
}

// budget is an object's write budget: tokens, refilled one per
// ObjectRefill since at, up to ObjectBurst.
type budget struct {
	tokens int
	at     time.Time
}

// allow takes one write from the budget of the object ref, by UID (by
// kind, namespace and name without one), and reports whether there was
// one. Objects with full budgets are forgotten when more than CacheSize are
// remembered: a full budget is a new one.
func (r *Recorder) allow(ref corev1.ObjectReference) bool {
	uid := string(ref.UID)
	if uid == "" {
		uid = ref.Kind + "/" + ref.Namespace + "/" + ref.Name
	}
	now := r.opts.Clock.Now()
	b, ok := r.budgets[uid]
	if !ok {
		if len(r.budgets) >= r.opts.CacheSize {
			for u, o := range r.budgets {
				if r.refill(o, now); o.tokens == r.opts.ObjectBurst {
					delete(r.budgets, u)
				}
			}
		}
		b = &budget{tokens: r.opts.ObjectBurst, at: now}
		r.budgets[uid] = b
	}
	r.refill(b, now)
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

func (r *Recorder) refill(b *budget, now time.Time) {
	if b.tokens >= r.opts.ObjectBurst {
		b.at = now
		return
	}
	n := int(now.Sub(b.at) / r.opts.ObjectRefill)
	if n <= 0 {
		return
	}
	b.tokens = min(r.opts.ObjectBurst, b.tokens+n)
	b.at = b.at.Add(time.Duration(n) * r.opts.ObjectRefill)
}

// lru remembers the most recently seen events, up to a size: a map to
// items that are themselves the links of the recency list (most recent at
// the head), so that an event costs one item and its map entry. An event
// is known by a 64-bit hash of its key (eight strings): the item holds no
// string of the key, which would keep the strings of an older copy of the
// object alive, and takes 96 bytes instead of 208. Two events are taken for
// one only if their keys hash alike (with CacheSize events remembered,
// odds of about 1 in 4*10^15 per event): a repeat of one then updates the other's Event.
type lru struct {
	size       int
	seed       maphash.Seed
	head, tail *lruItem
	items      map[uint64]*lruItem
}

type lruItem struct {
	hash       uint64
	prev, next *lruItem
	w          written
}

func newLRU(size int) *lru {
	return &lru{size: size, seed: maphash.MakeSeed(), items: make(map[uint64]*lruItem)}
}

func (l *lru) hash(k eventKey) uint64 {
	var h maphash.Hash
	h.SetSeed(l.seed)
	for _, s := range [...]string{k.apiVersion, k.kind, k.namespace, k.name, string(k.uid), k.eventType, k.reason, k.message} {
		// Length-prefixed, so that fields cannot run into each other
		// (a message may hold any byte).
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.WriteString(s)
	}
	return h.Sum64()
}

func (l *lru) get(k eventKey) (*written, bool) {
	it := l.items[l.hash(k)]
	if it == nil {
		return nil, false
	}
	l.unlink(it)
	l.pushFront(it)
	return &it.w, true
}

func (l *lru) put(k eventKey, w written) {
	h := l.hash(k)
	if it := l.items[h]; it != nil {
		it.w = w
		l.unlink(it)
		l.pushFront(it)
		return
	}
	it := &lruItem{hash: h, w: w}
	l.items[h] = it
	l.pushFront(it)
	for len(l.items) > l.size {
		last := l.tail
		l.unlink(last)
		delete(l.items, last.hash)
	}
}

func (l *lru) remove(k eventKey) {
	h := l.hash(k)
	if it := l.items[h]; it != nil {
		l.unlink(it)
		delete(l.items, h)
	}
}

func (l *lru) pushFront(it *lruItem) {
	it.prev, it.next = nil, l.head
	if l.head != nil {
		l.head.prev = it
	}
	l.head = it
	if l.tail == nil {
		l.tail = it
	}
}

func (l *lru) unlink(it *lruItem) {
	if it.prev != nil {
		it.prev.next = it.next
	} else if l.head == it {
		l.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else if l.tail == it {
		l.tail = it.prev
	}
	it.prev, it.next = nil, nil
}

// Metric results and drop reasons.
const (
	resultCreated     = "created"
	resultAggregated  = "aggregated"
	resultFailed      = "failed"
	resultDeferred    = "deferred"
	reasonQueueFull   = "queue_full"
	reasonRateLimited = "rate_limited"
	reasonInvalid     = "invalid"
	reasonStopped     = "stopped"
)

type recorderMetrics struct {
	events *prometheus.CounterVec // by result
	drops  *prometheus.CounterVec // by reason
	comp   string
}

func newRecorderMetrics(reg prometheus.Registerer, component string) (*recorderMetrics, error) {
	events, err := kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "event_recorder_events_total",
		Help: "Events written to the API server, by result: created (a new Event), aggregated (added to the series or count of an existing one), deferred (a repeat over its object's budget, counted in the series' next write), failed.",
	}, []string{"component", "result"}))
	if err != nil {
		return nil, fmt.Errorf("record: registering metrics: %w", err)
	}
	drops, err := kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "event_recorder_dropped_total",
		Help: "Events dropped before reaching the API server, by reason: queue_full, invalid (bad type or object), stopped (recorded after shutdown), rate_limited (a new event over its object's budget).",
	}, []string{"component", "reason"}))
	if err != nil {
		return nil, fmt.Errorf("record: registering metrics: %w", err)
	}
	return &recorderMetrics{events: events, drops: drops, comp: component}, nil
}

func (m *recorderMetrics) written(result string, n int) {
	m.events.WithLabelValues(m.comp, result).Add(float64(n))
}

func (m *recorderMetrics) dropped(reason string) {
	m.drops.WithLabelValues(m.comp, reason).Inc()
}
