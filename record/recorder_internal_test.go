package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop/client"
)

// fakeAPI stands in for the API server's two Event APIs, storing what the
// recorder asked of each. Patch of a name in gone answers NotFound, as for
// an Event the API server has expired. The server serves events.k8s.io/v1
// unless noEventsAPI; discoveryErr fails the question.
type fakeAPI struct {
	mu           sync.Mutex
	created      []*eventsv1.Event // through events.k8s.io/v1
	coreCreated  []*corev1.Event   // through core/v1
	patches      []string          // "name count": series.count, or count on core/v1
	corePatches  []string
	gone         map[string]bool
	noEventsAPI  bool
	discoveryErr error
}

func (f *fakeAPI) sinks() sinks {
	return sinks{events: eventsAPI{f}, core: coreAPI{f}, servesEvents: func(context.Context) (bool, error) {
		return !f.noEventsAPI, f.discoveryErr
	}}
}

// patched checks a patch and returns the count it sets, at path.
func (f *fakeAPI) patched(name string, pt types.PatchType, data []byte, series bool) (int32, error) {
	if f.gone[name] {
		return 0, apierrors.NewNotFound(corev1.Resource("events"), name)
	}
	if pt != types.MergePatchType {
		return 0, fmt.Errorf("patch type %s", pt)
	}
	var p struct {
		Count  *int32
		Series *struct {
			Count            int32
			LastObservedTime metav1.MicroTime
		}
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return 0, err
	}
	switch {
	case series && p.Series != nil && p.Count == nil && !p.Series.LastObservedTime.IsZero():
		return p.Series.Count, nil
	case !series && p.Count != nil && p.Series == nil:
		return *p.Count, nil
	}
	return 0, fmt.Errorf("patch %s: want only a series (events.k8s.io/v1: %v) or a count (core/v1)", data, series)
}

type eventsAPI struct{ *fakeAPI }

func (f eventsAPI) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := ev.DeepCopy()
	if ev.GenerateName != "" || slices.ContainsFunc(f.created, func(c *eventsv1.Event) bool { return c.Name == ev.Name }) {
		return nil, fmt.Errorf("event %q (generateName %q): want a new name of its own", ev.Name, ev.GenerateName)
	}
	out.Name = ev.Name
	f.created = append(f.created, out)
	return out, nil
}

func (f eventsAPI) Patch(_ context.Context, _, name string, pt types.PatchType, data []byte, _ client.PatchOptions) (*eventsv1.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.patched(name, pt, data, true)
	if err != nil {
		return nil, err
	}
	f.patches = append(f.patches, fmt.Sprintf("%s %d", name, n))
	return &eventsv1.Event{}, nil
}

type coreAPI struct{ *fakeAPI }

func (f coreAPI) Create(_ context.Context, ev *corev1.Event) (*corev1.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := ev.DeepCopy()
	out.Name = fmt.Sprintf("%s%d", ev.GenerateName, len(f.coreCreated))
	f.coreCreated = append(f.coreCreated, out)
	return out, nil
}

func (f coreAPI) Patch(_ context.Context, _, name string, pt types.PatchType, data []byte, _ client.PatchOptions) (*corev1.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.patched(name, pt, data, false)
	if err != nil {
		return nil, err
	}
	f.corePatches = append(f.corePatches, fmt.Sprintf("%s %d", name, n))
	return &corev1.Event{}, nil
}

func newTestRecorder(t *testing.T, s sinks, opts Options) *Recorder {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Registerer = prometheus.NewRegistry()
	r, err := newRecorder(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"}}
}

// runUntilDrained starts r, stops it and waits for Start to return; Start
// writes everything queued before it returns.
func runUntilDrained(t *testing.T, r *Recorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("Start = %v", err)
	}
}

func TestEvent_FullQueueDropsAndCountsInsteadOfBlocking(t *testing.T) {
	s := &fakeAPI{}
	r := newTestRecorder(t, s.sinks(), Options{QueueSize: 2})
	for i := range 5 {
		r.Event(pod("p"), Normal, fmt.Sprintf("Reason%d", i), "m") // must not block
	}
	if got := testutil.ToFloat64(r.metrics.drops.WithLabelValues(DefaultComponent, reasonQueueFull)); got != 3 {
		t.Fatalf("dropped (queue_full) = %v, want 3", got)
	}
	runUntilDrained(t, r)
	if len(s.created) != 2 || s.created[0].Reason != "Reason0" || s.created[1].Reason != "Reason1" {
		t.Fatalf("created %d events, want the two queued (Reason0, Reason1)", len(s.created))
	}
}

func TestEvent_InvalidTypeOrObjectIsDroppedAndCounted(t *testing.T) {
	r := newTestRecorder(t, (&fakeAPI{}).sinks(), Options{})
	r.Event(pod("p"), "Error", "Bad", "not a valid type")
	r.Event(nil, Normal, "NoObject", "m")
	type unknown struct{ corev1.Pod } // not in any scheme
	r.Event(&unknown{}, Normal, "UnknownKind", "m")
	r.Event(pod("p"), Normal, "", "no reason")
	r.Event(pod("p"), Normal, strings.Repeat("R", maxReasonLength+1), "a reason the Events API refuses")
	if got := testutil.ToFloat64(r.metrics.drops.WithLabelValues(DefaultComponent, reasonInvalid)); got != 5 {
		t.Fatalf("dropped (invalid) = %v, want 5", got)
	}
	if q := r.take(); len(q) != 0 {
		t.Fatalf("%d invalid events were queued", len(q))
	}
}

func TestStart_EventsAfterStopAreDroppedAndSecondStartIsRejected(t *testing.T) {
	r := newTestRecorder(t, (&fakeAPI{}).sinks(), Options{})
	runUntilDrained(t, r)
	r.Event(pod("p"), Normal, "Late", "m")
	if got := testutil.ToFloat64(r.metrics.drops.WithLabelValues(DefaultComponent, reasonStopped)); got != 1 {
		t.Fatalf("dropped (stopped) = %v, want 1", got)
	}
	if err := r.Start(t.Context()); err != ErrAlreadyStarted {
		t.Fatalf("second Start = %v, want ErrAlreadyStarted", err)
	}
}

func TestWrite_RepeatsBecomeASeriesOfOneEventAndAnExpiredEventIsCreatedAnew(t *testing.T) {
	s := &fakeAPI{gone: map[string]bool{}}
	r := newTestRecorder(t, s.sinks(), Options{Component: "foo-controller", Host: "node-1"})
	write := func() {
		t.Helper()
		r.writeBatch(t.Context(), r.batch(r.take()))
	}
	// The first occurrence is a singleton: no series.
	r.Event(pod("p"), Warning, "Failed", "it broke")
	write()
	if len(s.created) != 1 || s.created[0].Series != nil {
		t.Fatalf("created %v, want one Event without a series", seriesCounts(s.created))
	}
	ev := s.created[0]
	want := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: "7"}
	if ev.Regarding != want || ev.Related != nil || ev.Namespace != "ns" || !strings.HasPrefix(ev.Name, "p.") {
		t.Errorf("regarding %+v related %v in %s/%s, want the pod, nothing related, in ns/p.*", ev.Regarding, ev.Related, ev.Namespace, ev.Name)
	}
	if ev.Type != Warning || ev.Reason != "Failed" || ev.Action != "Failed" || ev.Note != "it broke" || ev.EventTime.IsZero() {
		t.Errorf("type %q reason %q action %q note %q eventTime %v", ev.Type, ev.Reason, ev.Action, ev.Note, ev.EventTime)
	}
	if ev.ReportingController != "foo-controller" || ev.ReportingInstance != "node-1" {
		t.Errorf("reporting %q/%q, want foo-controller/node-1", ev.ReportingController, ev.ReportingInstance)
	}
	if ev.DeprecatedCount != 0 || !ev.DeprecatedFirstTimestamp.IsZero() || ev.DeprecatedSource != (corev1.EventSource{}) {
		t.Errorf("deprecated fields set (count %d, first %v, source %+v); the Events API refuses them on create", ev.DeprecatedCount, ev.DeprecatedFirstTimestamp, ev.DeprecatedSource)
	}
	// The second starts the series at 2, the third moves it to 3: the
	// same object, patched.
	for range 2 {
		r.Event(pod("p"), Warning, "Failed", "it broke")
		write()
	}
	if len(s.created) != 1 || fmt.Sprint(s.patches) != fmt.Sprintf("[%[1]s 2 %[1]s 3]", ev.Name) {
		t.Fatalf("created %d, patches %v; want %s's series at 2 then 3", len(s.created), s.patches, ev.Name)
	}
	// Repeats queued together are one write; another message is another
	// event, whose folded repeats make it a series from the start.
	for range 3 {
		r.Event(pod("p"), Warning, "Failed", "it broke")
		r.Event(pod("p"), Warning, "Failed", "something else")
	}
	write()
	if len(s.patches) != 3 || s.patches[2] != ev.Name+" 6" || len(s.created) != 2 || s.created[1].Series == nil || s.created[1].Series.Count != 3 {
		t.Fatalf("patches %v, created %v; want %s at 6 and a new Event with a series of 3", s.patches, seriesCounts(s.created), ev.Name)
	}
	// The Event expired in the API server: the next repeat creates a new one.
	s.gone[ev.Name] = true
	r.Event(pod("p"), Warning, "Failed", "it broke")
	write()
	if len(s.created) != 3 || s.created[2].Series != nil || s.created[2].Note != "it broke" {
		t.Fatalf("after expiry created %v, want a third Event, a singleton", seriesCounts(s.created))
	}
}

func TestWrite_ARepeatAfterTheSeriesWindowStartsANewEvent(t *testing.T) {
	s := &fakeAPI{}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	r := newTestRecorder(t, s.sinks(), Options{Clock: clk})
	record := func() {
		r.Event(pod("p"), Normal, "Synced", "synced")
		r.writeBatch(t.Context(), r.batch(r.take()))
	}
	record()
	clk.SetTime(clk.Now().Add(seriesWindow)) // still open: at most seriesWindow since the last
	record()
	clk.SetTime(clk.Now().Add(seriesWindow + time.Second))
	record()
	if len(s.created) != 2 || len(s.patches) != 1 || s.patches[0] != s.created[0].Name+" 2" {
		t.Fatalf("created %v, patches %v; want the second in the first Event's series, the third a new Event", seriesCounts(s.created), s.patches)
	}
	if !s.created[1].EventTime.Equal(&metav1.MicroTime{Time: clk.Now()}) {
		t.Errorf("new Event's eventTime %v, want %v", s.created[1].EventTime, clk.Now())
	}
}

func TestWrite_ForgottenEventIsCreatedAgain(t *testing.T) {
	s := &fakeAPI{}
	r := newTestRecorder(t, s.sinks(), Options{CacheSize: 1})
	for _, reason := range []string{"A", "B", "A"} {
		r.Event(pod("p"), Normal, reason, "m")
		r.writeBatch(t.Context(), r.batch(r.take()))
	}
	if len(s.created) != 3 || len(s.patches) != 0 {
		t.Fatalf("created %d, patched %d; want A forgotten after B (cache of 1), so 3 creates", len(s.created), len(s.patches))
	}
}

// The fallback: a server without events.k8s.io/v1 gets core/v1 Events,
// with repeats in count and lastTimestamp.
func TestStart_WritesCoreV1EventsWhereTheServerLacksEventsV1(t *testing.T) {
	s := &fakeAPI{noEventsAPI: true}
	r := newTestRecorder(t, s.sinks(), Options{Component: "foo-controller", Host: "node-1"})
	r.Event(pod("p"), Normal, "Synced", "synced")
	r.Event(pod("p"), Normal, "Synced", "synced")
	runUntilDrained(t, r)
	if len(s.created) != 0 || len(s.coreCreated) != 1 {
		t.Fatalf("created %d events.k8s.io/v1 and %d core/v1 Events, want just one core/v1", len(s.created), len(s.coreCreated))
	}
	ev := s.coreCreated[0]
	if ev.Count != 2 || ev.Reason != "Synced" || ev.Message != "synced" || ev.InvolvedObject.Name != "p" ||
		ev.Source != (corev1.EventSource{Component: "foo-controller", Host: "node-1"}) || ev.FirstTimestamp.IsZero() || !ev.EventTime.IsZero() {
		t.Errorf("core/v1 Event %+v, want count 2 from foo-controller on node-1 with first/lastTimestamp and no eventTime", ev)
	}
	// A later repeat patches its count, still on core/v1 (as Start chose;
	// it has returned, so the repeat is written here).
	later := pending{ref: ev.InvolvedObject, eventType: Normal, reason: "Synced", message: "synced", at: time.Now()}
	r.writeBatch(t.Context(), r.batch([]pending{later}))
	if len(s.corePatches) != 1 || s.corePatches[0] != ev.Name+" 3" || len(s.patches) != 0 {
		t.Fatalf("core patches %v, series patches %v; want %s to count 3", s.corePatches, s.patches, ev.Name)
	}
}

func TestStart_WritesEventsV1WhenDiscoveryFails(t *testing.T) {
	s := &fakeAPI{noEventsAPI: true, discoveryErr: errors.New("connection refused")}
	r := newTestRecorder(t, s.sinks(), Options{})
	r.Event(pod("p"), Normal, "Synced", "synced")
	runUntilDrained(t, r)
	if len(s.created) != 1 || len(s.coreCreated) != 0 {
		t.Fatalf("created %d events.k8s.io/v1 and %d core/v1 Events, want the current API assumed", len(s.created), len(s.coreCreated))
	}
}

func TestOptions_ComponentMustBeAQualifiedNameAndHostDefaultsToIt(t *testing.T) {
	if _, err := newRecorder((&fakeAPI{}).sinks(), Options{Component: "foo controller"}); err == nil || !strings.Contains(err.Error(), "qualified name") {
		t.Fatalf("Component with a space: %v, want an error saying it must be a qualified name", err)
	}
	o := Options{Component: "example.com/foo"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if in := o.instance(); in != "example.com/foo" {
		t.Errorf("reportingInstance without a Host = %q, want the Component", in)
	}
	o.Host = strings.Repeat("h", 200)
	if in := o.instance(); len(in) != maxInstanceLength {
		t.Errorf("reportingInstance of a 200-byte Host is %d bytes, want cut to %d", len(in), maxInstanceLength)
	}
}

func TestEventName_IsADNSSubdomainUniqueToTheRecorder(t *testing.T) {
	r := newTestRecorder(t, (&fakeAPI{}).sinks(), Options{})
	at := time.Unix(0, 0x10)
	for name, want := range map[string]string{
		"web-1":                 "web-1.",
		"system:controller:foo": "system-controller-foo.",
		"Mixed_Case":            "mixed-case.",
		":::":                   "event.",
	} {
		got := r.eventName(name, at)
		if !strings.HasPrefix(got, want) || len(validation.IsDNS1123Subdomain(got)) > 0 {
			t.Errorf("eventName(%q) = %q, want a DNS subdomain beginning %q", name, got, want)
		}
	}
	if a, b := r.eventName("p", at), r.eventName("p", at); a == b {
		t.Errorf("two Events about p at the same time both named %q", a)
	}
	if long := r.eventName(strings.Repeat("x", 300), at); len(long) > 253 {
		t.Errorf("name %d bytes long, want at most 253", len(long))
	}
}

func seriesCounts(evs []*eventsv1.Event) []int32 {
	var out []int32
	for _, e := range evs {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		out = append(out, n)
	}
	return out
}

func TestReference_FromSchemeForTypedObjectsAndFromTheObjectOtherwise(t *testing.T) {
	r := newTestRecorder(t, (&fakeAPI{}).sinks(), Options{})
	ref, err := reference(r.opts.Scheme, pod("p"))
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: "7"}
	if ref != want {
		t.Fatalf("reference(pod) = %+v, want %+v", ref, want)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v2")
	u.SetKind("Thing")
	u.SetName("t")
	ref, err = reference(r.opts.Scheme, u)
	if err != nil || ref.APIVersion != "example.com/v2" || ref.Kind != "Thing" || ref.Namespace != "" {
		t.Fatalf("reference(unstructured) = %+v, %v", ref, err)
	}
}

func TestTruncate_CutsLongMessagesAtACharacterBoundary(t *testing.T) {
	msg := strings.Repeat("é", MaxMessageLength) // 2 bytes each
	got := truncate(msg)
	if len(got) > MaxMessageLength || !utf8.ValidString(got) || len(got) < MaxMessageLength-1 {
		t.Fatalf("truncate gave %d bytes, valid %v; want at most %d valid UTF-8", len(got), utf8.ValidString(got), MaxMessageLength)
	}
	if truncate("short") != "short" {
		t.Fatal("short message changed")
	}
}

// hangingSink never answers: each request ends only when its context does.
type hangingSink struct{}

func (hangingSink) Create(ctx context.Context, _ *eventsv1.Event) (*eventsv1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hangingSink) Patch(ctx context.Context, _, _ string, _ types.PatchType, _ []byte, _ client.PatchOptions) (*eventsv1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStart_DrainingAHungAPIServerEndsAfterDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		served := func(context.Context) (bool, error) { return true, nil }
		r := newTestRecorder(t, sinks{events: hangingSink{}, servesEvents: served}, Options{DrainTimeout: 3 * time.Second, WriteTimeout: 10 * time.Second})
		for _, reason := range []string{"A", "B", "C"} {
			r.Event(pod("p"), Normal, reason, "m")
		}
		began := time.Now()
		runUntilDrained(t, r)
		if took := time.Since(began); took != 3*time.Second {
			t.Fatalf("Start returned %v after its context ended, want the DrainTimeout of 3s", took)
		}
		failed := testutil.ToFloat64(r.metrics.events.WithLabelValues(DefaultComponent, resultFailed))
		dropped := testutil.ToFloat64(r.metrics.drops.WithLabelValues(DefaultComponent, reasonStopped))
		if failed != 1 || dropped != 2 {
			t.Fatalf("failed %v, dropped %v; want the write in flight failed and the other two dropped", failed, dropped)
		}
	})
}

func TestLRU_ForgetsTheLeastRecentlySeen(t *testing.T) {
	l := newLRU(2)
	key := func(reason string) eventKey { return eventKey{name: "p", reason: reason} }
	l.put(key("A"), written{name: "a"})
	l.put(key("B"), written{name: "b"})
	if w, ok := l.get(key("A")); !ok || w.name != "a" { // A is now the most recent
		t.Fatalf("get A = %v, %v; want a", w, ok)
	}
	l.put(key("C"), written{name: "c"}) // evicts B
	if _, ok := l.get(key("B")); ok {
		t.Error("B is remembered; want it forgotten as the least recently seen")
	}
	for _, r := range []string{"A", "C"} {
		if _, ok := l.get(key(r)); !ok {
			t.Errorf("%s is forgotten; want it remembered", r)
		}
	}
	l.remove(key("A"))
	l.remove(key("C"))
	if len(l.items) != 0 || l.head != nil || l.tail != nil {
		t.Errorf("after removing all: %d items, head %p, tail %p; want an empty list", len(l.items), l.head, l.tail)
	}
	w, _ := func() (*written, bool) { l.put(key("D"), written{count: 1}); return l.get(key("D")) }()
	w.count = 5
	if got, _ := l.get(key("D")); got.count != 5 {
		t.Errorf("count after changing the remembered event = %d, want 5 (get returns the item's own)", got.count)
	}
}

// An object's events are budgeted: a burst, then one per refill. A new
// event over budget is dropped and counted; a repeat over budget is
// counted in its series and written with the next repeat within budget.
func TestWrite_AnObjectsEventsAreBudgetedAndRepeatsOverBudgetAreNotLost(t *testing.T) {
	s := &fakeAPI{}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	reg := prometheus.NewRegistry()
	r, err := newRecorder(s.sinks(), Options{Clock: clk, ObjectBurst: 3, ObjectRefill: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	record := func(obj *corev1.Pod, msg string) {
		r.Event(obj, Warning, "Failed", msg)
		r.writeBatch(t.Context(), r.batch(r.take()))
	}
	for i := range 5 { // five distinct messages: three within the burst
		record(pod("p"), fmt.Sprintf("failure %d", i))
	}
	if len(s.created) != 3 {
		t.Fatalf("created %d Events for 5 distinct ones with a burst of 3, want 3", len(s.created))
	}
	record(pod("other"), "failure 0") // another object has a budget of its own
	if len(s.created) != 4 {
		t.Fatalf("created %d, want another object's event written", len(s.created))
	}
	// Two repeats of the first over budget: counted, not written.
	record(pod("p"), "failure 0")
	record(pod("p"), "failure 0")
	if len(s.patches) != 0 {
		t.Fatalf("patches %v over budget, want none", s.patches)
	}
	// A refill later, the next repeat writes the series with all of them.
	clk.SetTime(clk.Now().Add(time.Minute))
	record(pod("p"), "failure 0")
	if want := s.created[0].Name + " 4"; fmt.Sprint(s.patches) != "["+want+"]" {
		t.Fatalf("patches %v, want [%s]: the first, two deferred repeats and this one", s.patches, want)
	}
	for _, c := range []struct {
		metric, label string
		want          float64
	}{
		{"event_recorder_dropped_total", "rate_limited", 2},
		{"event_recorder_events_total", "deferred", 2},
		{"event_recorder_events_total", "created", 4},
	} {
		if got := counterValue(t, reg, c.metric, c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.metric, c.label, got, c.want)
		}
	}
}

// counterValue returns the value of the counter named metric whose label
// (result or reason) is label.
func counterValue(t *testing.T, reg *prometheus.Registry, metric, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "result" || l.GetName() == "reason") && l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// An event is known by its key's hash: keys whose fields would run into
// each other if written one after the other are still different events,
// and the least recently seen is forgotten first.
func TestLRU_KeysOfFieldsThatRunIntoEachOtherAreDifferentEvents(t *testing.T) {
	l := newLRU(3)
	keys := []eventKey{
		{name: "ab", reason: "c"},
		{name: "a", reason: "bc"},
		{name: "a", reason: "b", message: "c"},
		{name: "a", reason: "b\x00c"},
	}
	for i, k := range keys[:3] {
		l.put(k, written{name: fmt.Sprint(i)})
	}
	for i, k := range keys[:3] {
		if w, ok := l.get(k); !ok || w.name != fmt.Sprint(i) {
			t.Errorf("get %+v = %v, %v; want event %d", k, w, ok, i)
		}
	}
	l.put(keys[3], written{name: "3"}) // the least recent, keys[0], goes
	if w, ok := l.get(keys[0]); ok {
		t.Errorf("the least recent event is still remembered past the size: %v", w)
	}
	if w, ok := l.get(keys[3]); !ok || w.name != "3" || len(l.items) != 3 {
		t.Errorf("get %+v = %v, %v with %d items; want event 3 of 3", keys[3], w, ok, len(l.items))
	}
	l.remove(keys[3])
	if _, ok := l.get(keys[3]); ok || len(l.items) != 2 || l.head == nil || l.tail == nil {
		t.Errorf("a removed event is still remembered, or the list broke (%d items)", len(l.items))
	}
}
