package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
)

func cm(ns, name, uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

func newStore(t *testing.T, opts cache.Options[*corev1.ConfigMap]) (*cache.Store[*corev1.ConfigMap], *cache.Writer[*corev1.ConfigMap]) {
	t.Helper()
	s, w, err := cache.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, w
}

func TestNew_RejectsInvalidIndexes(t *testing.T) {
	for name, idx := range map[string]map[string]cache.IndexFunc[*corev1.ConfigMap]{
		"empty name":         {"": cache.LabelIndexFunc[*corev1.ConfigMap]},
		"built-in name":      {cache.IndexNamespace: cache.LabelIndexFunc[*corev1.ConfigMap]},
		"nil index function": {"x": nil},
	} {
		if _, _, err := cache.New(cache.Options[*corev1.ConfigMap]{Indexes: idx}); err == nil {
			t.Errorf("%s: New accepted %v", name, idx)
		}
	}
}

func TestKey_StringRoundTrips(t *testing.T) {
	for _, k := range []cache.Key{{Name: "n"}, {Namespace: "ns", Name: "n"}} {
		got, err := cache.ParseKey(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	for _, bad := range []string{"", "/", "ns/", "/n", "a/b/c"} {
		if _, err := cache.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		}
	}
}

func TestReplace_ReportsAddsUpdatesAndDeletesAndKeepsUnchangedPointers(t *testing.T) {
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
	same := cm("ns", "same", "u1", "10")
	w.Apply(same, same.GetResourceVersion())
	w.Apply(cm("ns", "changed", "u2", "11"), "11")
	w.Apply(cm("ns", "gone", "u3", "12"), "12")
	w.Apply(cm("ns", "recreated", "u4", "13"), "13")

	changes := w.Replace([]*corev1.ConfigMap{
		cm("ns", "same", "u1", "10"),
		cm("ns", "changed", "u2", "20"),
		cm("ns", "recreated", "u5", "21"),
		cm("other", "new", "u6", "22"),
	}, "30")

	got := map[string]int{}
	sawAdd := false
	for _, c := range changes {
		var k cache.Key
		switch c.Kind {
		case cache.Deleted:
			if sawAdd {
				t.Errorf("Deleted reported after an Added or Updated: %v", changes)
			}
			k = cache.KeyOf(c.Old)
		default:
			sawAdd = true
			k = cache.KeyOf(c.New)
		}
		got[c.Kind.String()+" "+k.String()]++
	}
	want := map[string]int{"Updated ns/changed": 1, "Deleted ns/gone": 1, "Deleted ns/recreated": 1, "Added ns/recreated": 1, "Added other/new": 1}
	if len(got) != len(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("changes %v, want %v", got, want)
		}
	}
	if o, _ := s.Get("ns", "same"); o != same {
		t.Errorf("an unchanged object was swapped for the snapshot's copy")
	}
	if s.Len() != 4 || s.ResourceVersion() != "30" {
		t.Errorf("after Replace: Len=%d RV=%q, want 4 and 30", s.Len(), s.ResourceVersion())
	}
}

func TestByIndex_UnknownIndexIsAnError(t *testing.T) {
	s, _ := newStore(t, cache.Options[*corev1.ConfigMap]{})
	if _, err := s.ByIndex("nope", "x"); !errors.Is(err, cache.ErrUnknownIndex) {
		t.Fatalf("ByIndex on an unknown index: err = %v, want ErrUnknownIndex", err)
	}
}

func TestWaitFor_ReturnsOnceTheStoreReachesTheResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
		w.Apply(cm("ns", "a", "u1", "5"), "5")
		ctx := t.Context()
		if err := s.WaitFor(ctx, cache.Key{Namespace: "ns", Name: "a"}, "5"); err != nil {
			t.Fatalf("object already at rv: %v", err)
		}

		done := make(chan error, 3)
		go func() { done <- s.WaitFor(ctx, cache.Key{Namespace: "ns", Name: "a"}, "7") }()
		go func() { done <- s.WaitFor(ctx, cache.Key{Namespace: "ns", Name: "b"}, "9") }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("WaitFor returned early: %v", err)
		default:
		}
		w.Apply(cm("ns", "a", "u1", "7"), "7") // the object itself reaches 7
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		w.Bookmark("9") // a bookmark carries the whole store to 9, covering a deleted "b"
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := s.WaitFor(tctx, cache.Key{Namespace: "ns", Name: "a"}, "100")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitFor past its deadline: err = %v, want DeadlineExceeded", err)
		}
	})
}

// Apply and Delete apply a change while the store records only how far
// the stream is applied, behind the change's own resourceVersion, so
// WaitFor does not take a change still waiting for the whole store's.
func TestApplyAndDelete_RecordTheGivenResourceVersion(t *testing.T) {
	for _, encoded := range []bool{false, true} {
		s, w := newStore(t, cache.Options[*corev1.ConfigMap]{Encoded: encoded})
		w.Apply(cm("ns", "a", "u1", "7"), "4")
		if got, ok := s.Get("ns", "a"); !ok || got.ResourceVersion != "7" {
			t.Fatalf("encoded=%v: a = %v, %v after Apply; want it at 7", encoded, got, ok)
		}
		if rv := s.ResourceVersion(); rv != "4" {
			t.Fatalf("encoded=%v: store at %s after Apply(a@7, 4), want 4", encoded, rv)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.WaitFor(ctx, cache.Key{Namespace: "ns", Name: "b"}, "6"); err == nil {
			t.Fatalf("encoded=%v: WaitFor(b, 6) returned with the store at 4", encoded)
		}
		if _, existed := w.Delete(cm("ns", "a", "u1", "8"), "6"); !existed {
			t.Fatalf("encoded=%v: Delete did not find a", encoded)
		}
		if rv := s.ResourceVersion(); rv != "6" || s.Len() != 0 {
			t.Fatalf("encoded=%v: store at %s with %d objects after Delete(a@8, 6), want 6 and none", encoded, rv, s.Len())
		}
	}
}

func TestList_UsesLabelIndexAndStillAppliesTheWholeSelector(t *testing.T) {
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{Indexes: map[string]cache.IndexFunc[*corev1.ConfigMap]{
		cache.IndexLabel: cache.LabelIndexFunc[*corev1.ConfigMap],
	}})
	a := cm("ns", "a", "u1", "1")
	a.Labels = map[string]string{"app": "x", "tier": "web"}
	b := cm("ns", "b", "u2", "2")
	b.Labels = map[string]string{"app": "x", "tier": "db"}
	c := cm("other", "c", "u3", "3")
	c.Labels = map[string]string{"app": "x", "tier": "web"}
	for _, o := range []*corev1.ConfigMap{a, b, c} {
		w.Apply(o, o.GetResourceVersion())
	}
	sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "x", "tier": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.List(sel); len(got) != 2 {
		t.Errorf("List(app=x,tier=web) returned %d objects, want 2", len(got))
	}
	if got := s.ListInNamespace("ns", sel); len(got) != 1 || got[0] != a {
		t.Errorf("ListInNamespace(ns, app=x,tier=web) = %v, want [ns/a]", got)
	}
}
func TestEncoded_ReadsDecodeAFreshCopyOfWhatWasStoredWithoutManagedFields(t *testing.T) {
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{Encoded: true, Indexes: map[string]cache.IndexFunc[*corev1.ConfigMap]{
		cache.IndexLabel: cache.LabelIndexFunc[*corev1.ConfigMap],
	}})
	in := cm("ns", "a", "u1", "5")
	in.Labels = map[string]string{"app": "web"}
	in.Data = map[string]string{"payload": "value"}
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	if _, existed := w.Apply(in, in.GetResourceVersion()); existed {
		t.Fatal("Apply into an empty store reported an object it replaced")
	}
	if len(in.ManagedFields) != 1 || in.Namespace != "ns" {
		t.Fatalf("Apply changed the object it was given: %+v", in.ObjectMeta)
	}
	want := in.DeepCopy()
	want.ManagedFields = nil

	got, ok := s.Get("ns", "a")
	if !ok || !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("Get = %v, %v; want %v", got, ok, want)
	}
	again, _ := s.Get("ns", "a")
	if again == got {
		t.Error("two Gets of an encoded store returned one object; each read must decode its own")
	}
	// The strings are read from the stored entry in place, not copied per read.
	if unsafe.StringData(again.Data["payload"]) != unsafe.StringData(got.Data["payload"]) || unsafe.StringData(again.Name) != unsafe.StringData(got.Name) {
		t.Error("two Gets of an encoded store copied the object's strings; want them read from the stored entry")
	}
	again.Data["payload"] = "changed" // not shared: the cache stays as it was
	if l := s.List(labels.SelectorFromSet(labels.Set{"app": "web"})); len(l) != 1 || !equality.Semantic.DeepEqual(l[0], want) {
		t.Errorf("List(app=web) after a reader changed its object = %v, want [%v]", l, want)
	}

	upd := cm("ns", "a", "u1", "6")
	old, existed := w.Apply(upd, upd.GetResourceVersion())
	if !existed || !equality.Semantic.DeepEqual(old, want) {
		t.Errorf("Apply of an update returned %v, %v; want the decoded previous state %v", old, existed, want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, cache.Key{Namespace: "ns", Name: "a"}, "6"); err != nil {
		t.Errorf("WaitFor the stored resourceVersion: %v", err)
	}
	if objs, _ := s.ByIndex(cache.IndexLabel, "app=web"); len(objs) != 0 {
		t.Errorf("label index still lists %v after the labels went", objs)
	}
	old, existed = w.Delete(cm("ns", "a", "u1", "7"), "7")
	if !existed || old.ResourceVersion != "6" || s.Len() != 0 {
		t.Errorf("Delete returned %v, %v and left %d objects; want the state at 6 and an empty store", old, existed, s.Len())
	}
}

func TestEncoded_NeedsAProtobufType(t *testing.T) {
	if _, _, err := cache.New(cache.Options[*unstructured.Unstructured]{Encoded: true}); err == nil {
		t.Fatal("an encoded store of unstructured objects, which have no protobuf encoding, was accepted")
	}
}

func TestEncoded_SharedLabelSetsAreCheckedByTheMutationDetector(t *testing.T) {
	var reports []error
	restore := cache.SetMutationHandler(func(err error) { reports = append(reports, err) })
	defer restore()
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{Encoded: true})
	for _, name := range []string{"a", "b"} {
		o := cm("ns", name, "u-"+name, "1")
		o.Labels = map[string]string{"app": "web"}
		w.Apply(o, o.GetResourceVersion())
	}
	a, _ := s.Get("ns", "a")
	b, _ := s.Get("ns", "b")
	if a.Labels["app"] != "web" || b.Labels["app"] != "web" {
		t.Fatalf("labels decoded as %v and %v", a.Labels, b.Labels)
	}
	if len(reports) != 0 {
		t.Fatalf("reports before any mutation: %v", reports)
	}
	a.Labels["app"] = "db" // breaks the read-only rule: the set is shared
	s.Get("ns", "b")
	if len(reports) == 0 || !strings.Contains(reports[0].Error(), "modified in place") {
		t.Fatalf("a shared label set modified by a reader was not reported (reports %v)", reports)
	}
}

func TestChanged_ClosesOnEveryKindOfChangeAndNotBefore(t *testing.T) {
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		what  string
		apply func()
	}{
		{"an apply", func() { w.Apply(cm("ns", "a", "u1", "5"), "5") }},
		{"a bookmark", func() { w.Bookmark("6") }},
		{"a delete", func() { w.Delete(cm("ns", "a", "u1", "7"), "7") }},
		{"a relist", func() { w.Replace(nil, "8") }},
	} {
		ch := s.Changed()
		if closed(ch) {
			t.Fatalf("Changed was closed before %s", step.what)
		}
		if again := s.Changed(); again != ch {
			t.Fatalf("two Changed calls with no change between gave two channels")
		}
		step.apply()
		if !closed(ch) {
			t.Fatalf("Changed was not closed by %s", step.what)
		}
	}
}

// A snapshot's notifications are a slice of Events, allocated as the first
// sync peaks (100,000 objects: 2.4 MB at 24 bytes an Event, 3.2 MB at 32).
func TestEvent_Is24Bytes(t *testing.T) {
	if got := unsafe.Sizeof(cache.Event[*corev1.ConfigMap]{}); got != 24 {
		t.Errorf("cache.Event is %d bytes, want 24 (the objects first, then Kind and the two flags)", got)
	}
}
