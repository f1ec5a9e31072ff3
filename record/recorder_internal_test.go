package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/client"
)

// recordingSink stores what the recorder asked for; Patch of a name in gone
// answers NotFound, as for an Event the API server has expired.
type recordingSink struct {
	mu      sync.Mutex
	created []*corev1.Event
	patches []string // "name count"
	gone    map[string]bool
}

func (s *recordingSink) Create(_ context.Context, ev *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ev.DeepCopy()
	out.Name = fmt.Sprintf("%s%d", ev.GenerateName, len(s.created))
	s.created = append(s.created, out)
	return out, nil
}

func (s *recordingSink) Patch(_ context.Context, _, name string, pt types.PatchType, data []byte, _ client.PatchOptions) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone[name] {
		return nil, apierrors.NewNotFound(corev1.Resource("events"), name)
	}
	if pt != types.MergePatchType {
		return nil, fmt.Errorf("patch type %s", pt)
	}
	var p struct{ Count int32 }
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	s.patches = append(s.patches, fmt.Sprintf("%s %d", name, p.Count))
	return &corev1.Event{}, nil
}

func newTestRecorder(t *testing.T, s sink, opts Options) *Recorder {
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
	s := &recordingSink{}
	r := newTestRecorder(t, s, Options{QueueSize: 2})
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
	r := newTestRecorder(t, &recordingSink{}, Options{})
	r.Event(pod("p"), "Error", "Bad", "not a valid type")
	r.Event(nil, Normal, "NoObject", "m")
	type unknown struct{ corev1.Pod } // not in any scheme
	r.Event(&unknown{}, Normal, "UnknownKind", "m")
	if got := testutil.ToFloat64(r.metrics.drops.WithLabelValues(DefaultComponent, reasonInvalid)); got != 3 {
		t.Fatalf("dropped (invalid) = %v, want 3", got)
	}
	if q := r.take(); len(q) != 0 {
		t.Fatalf("%d invalid events were queued", len(q))
	}
}

func TestStart_EventsAfterStopAreDroppedAndSecondStartIsRejected(t *testing.T) {
	s := &recordingSink{}
	r := newTestRecorder(t, s, Options{})
	runUntilDrained(t, r)
	r.Event(pod("p"), Normal, "Late", "m")
	if got := testutil.ToFloat64(r.metrics.drops.WithLabelValues(DefaultComponent, reasonStopped)); got != 1 {
		t.Fatalf("dropped (stopped) = %v, want 1", got)
	}
	if err := r.Start(t.Context()); err != ErrAlreadyStarted {
		t.Fatalf("second Start = %v, want ErrAlreadyStarted", err)
	}
}

func TestWrite_RepeatsAddToCountAndAnExpiredEventIsCreatedAnew(t *testing.T) {
	s := &recordingSink{gone: map[string]bool{}}
	r := newTestRecorder(t, s, Options{})
	// Three repeats queued together are one create with count 3.
	for range 3 {
		r.Event(pod("p"), Warning, "Failed", "it broke")
	}
	r.Event(pod("p"), Warning, "Failed", "something else") // another message: another event
	r.writeBatch(t.Context(), r.batch(r.take()))
	if len(s.created) != 2 || s.created[0].Count != 3 || s.created[1].Count != 1 {
		t.Fatalf("created %+v, want counts 3 and 1", counts(s.created))
	}
	// A later repeat patches the count.
	r.Event(pod("p"), Warning, "Failed", "it broke")
	r.writeBatch(t.Context(), r.batch(r.take()))
	if len(s.patches) != 1 || s.patches[0] != s.created[0].Name+" 4" {
		t.Fatalf("patches %v, want %s to count 4", s.patches, s.created[0].Name)
	}
	// The Event expired in the API server: the next repeat creates a new one.
	s.gone[s.created[0].Name] = true
	r.Event(pod("p"), Warning, "Failed", "it broke")
	r.writeBatch(t.Context(), r.batch(r.take()))
	if len(s.created) != 3 || s.created[2].Count != 1 || s.created[2].Message != "it broke" {
		t.Fatalf("after expiry created %v, want a third event with count 1", counts(s.created))
	}
}

func TestWrite_ForgottenEventIsCreatedAgain(t *testing.T) {
	s := &recordingSink{}
	r := newTestRecorder(t, s, Options{CacheSize: 1})
	for _, reason := range []string{"A", "B", "A"} {
		r.Event(pod("p"), Normal, reason, "m")
		r.writeBatch(t.Context(), r.batch(r.take()))
	}
	if len(s.created) != 3 || len(s.patches) != 0 {
		t.Fatalf("created %d, patched %d; want A forgotten after B (cache of 1), so 3 creates", len(s.created), len(s.patches))
	}
}

func counts(evs []*corev1.Event) []int32 {
	var out []int32
	for _, e := range evs {
		out = append(out, e.Count)
	}
	return out
}

func TestReference_FromSchemeForTypedObjectsAndFromTheObjectOtherwise(t *testing.T) {
	r := newTestRecorder(t, &recordingSink{}, Options{})
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

func (hangingSink) Create(ctx context.Context, _ *corev1.Event) (*corev1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hangingSink) Patch(ctx context.Context, _, _ string, _ types.PatchType, _ []byte, _ client.PatchOptions) (*corev1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStart_DrainingAHungAPIServerEndsAfterDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRecorder(t, hangingSink{}, Options{DrainTimeout: 3 * time.Second, WriteTimeout: 10 * time.Second})
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
