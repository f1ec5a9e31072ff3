package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// scripted is an informer.Source that emits a first snapshot, then
// whatever the test sends.
type scripted struct {
	initial []*corev1.ConfigMap
	events  chan []watcher.Event[*corev1.ConfigMap]
}

func (s *scripted) Run(ctx context.Context, emit func(watcher.Event[*corev1.ConfigMap])) error {
	emit(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart})
	for _, o := range s.initial {
		emit(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistItem, Object: o, ResourceVersion: o.ResourceVersion})
	}
	emit(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistDone, ResourceVersion: "1"})
	for {
		select {
		case <-ctx.Done():
			return nil
		case evs := <-s.events:
			for _, e := range evs {
				emit(e)
			}
		}
	}
}

func (s *scripted) LastError() error { return nil }

// snapshot is a relist with the given objects.
func snapshot(rv string, objs ...*corev1.ConfigMap) []watcher.Event[*corev1.ConfigMap] {
	evs := []watcher.Event[*corev1.ConfigMap]{{Type: watcher.RelistStart}}
	for _, o := range objs {
		evs = append(evs, watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistItem, Object: o, ResourceVersion: o.ResourceVersion})
	}
	return append(evs, watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistDone, ResourceVersion: rv})
}

func ev(t watcher.EventType, o *corev1.ConfigMap) []watcher.Event[*corev1.ConfigMap] {
	return []watcher.Event[*corev1.ConfigMap]{{Type: t, Object: o, ResourceVersion: o.ResourceVersion}}
}

// keyRecorder is a Reconciler that records the keys it is given.
type keyRecorder struct {
	mu   sync.Mutex
	keys []cache.Key
}

func (r *keyRecorder) Reconcile(ctx context.Context, k cache.Key) (controller.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, k)
	return controller.Result{}, nil
}

// take returns the keys recorded since the last take, sorted.
func (r *keyRecorder) take() []cache.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	slices.SortFunc(k, func(a, b cache.Key) int { return strings.Compare(a.String(), b.String()) })
	return k
}

func keys(names ...string) []cache.Key {
	var out []cache.Key
	for _, n := range names {
		out = append(out, cache.Key{Namespace: "ns", Name: n})
	}
	return out
}

// runOwned runs an informer over src and a controller whose sources are
// built by watch, and returns the recorder and a stop function.
func runWithInformer(t *testing.T, src *scripted, sources func(inf *informer.Informer[*corev1.ConfigMap]) []controller.Source[cache.Key]) (*keyRecorder, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	rec := &keyRecorder{}
	c, err := controller.New[cache.Key](rec, controller.Options[cache.Key]{Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sources(inf) {
		if err := c.Watch(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := inf.Start(ctx); err != nil {
			t.Errorf("informer Run: %v", err)
		}
	})
	wg.Go(func() {
		if err := c.Start(ctx); err != nil {
			t.Errorf("controller Start: %v", err)
		}
	})
	synctest.Wait()
	return rec, func() { cancel(); wg.Wait() }
}

var fooKind = schema.GroupKind{Group: "samplecontroller.k8s.io", Kind: "Foo"}

func TestOwns_MapsEventsOfOwnedObjectsToTheirOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const fooV = "samplecontroller.k8s.io/v1alpha1"
		child := cm("child", rv("2"), ownedBy(fooV, "Foo", "foo-1", true))
		other := cm("other", rv("3"), ownedBy("apps/v1", "Deployment", "d", true))
		src := &scripted{initial: []*corev1.ConfigMap{child, other}, events: make(chan []watcher.Event[*corev1.ConfigMap])}
		rec, stop := runWithInformer(t, src, func(inf *informer.Informer[*corev1.ConfigMap]) []controller.Source[cache.Key] {
			return []controller.Source[cache.Key]{controller.Owns(inf, fooKind)}
		})
		defer stop()

		if got := rec.take(); !slices.Equal(got, keys("foo-1")) {
			t.Errorf("initial list enqueued %v, want only the owner foo-1 (the Deployment-owned object is ignored)", got)
		}

		src.events <- ev(watcher.Modified, cm("child", rv("4"), ownedBy(fooV, "Foo", "foo-1", true), lbl("x", "1")))
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, keys("foo-1")) {
			t.Errorf("change of owned object enqueued %v, want foo-1", got)
		}

		src.events <- ev(watcher.Modified, cm("other", rv("5"), ownedBy("apps/v1", "Deployment", "d", true), lbl("x", "1")))
		synctest.Wait()
		if got := rec.take(); len(got) != 0 {
			t.Errorf("change of an object owned by another kind enqueued %v, want nothing", got)
		}

		src.events <- ev(watcher.Modified, cm("child", rv("6"), ownedBy(fooV, "Foo", "foo-2", true)))
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, keys("foo-1", "foo-2")) {
			t.Errorf("moving the object to another owner enqueued %v, want both owners", got)
		}

		src.events <- ev(watcher.Deleted, cm("child", rv("7"), ownedBy(fooV, "Foo", "foo-2", true)))
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, keys("foo-2")) {
			t.Errorf("delete of owned object enqueued %v, want foo-2", got)
		}
	})
}

func TestOwns_MapsADeleteSeenOnlyThroughARelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		child := cm("child", rv("2"), ownedBy("samplecontroller.k8s.io/v1alpha1", "Foo", "foo-1", true))
		keep := cm("keep", rv("3"))
		src := &scripted{initial: []*corev1.ConfigMap{child, keep}, events: make(chan []watcher.Event[*corev1.ConfigMap])}
		var (
			mu        sync.Mutex
			tombstone bool
		)
		sawTombstone := controller.Predicate[*corev1.ConfigMap](func(e cache.Event[*corev1.ConfigMap]) bool {
			if e.Kind == cache.Deleted && e.FinalStateUnknown {
				mu.Lock()
				tombstone = true
				mu.Unlock()
			}
			return true
		})
		rec, stop := runWithInformer(t, src, func(inf *informer.Informer[*corev1.ConfigMap]) []controller.Source[cache.Key] {
			return []controller.Source[cache.Key]{controller.Owns(inf, fooKind, sawTombstone)}
		})
		defer stop()
		rec.take()

		// The watch missed the delete; the next relist no longer has child.
		src.events <- snapshot("10", keep)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !tombstone {
			t.Fatal("the informer did not report a delete with FinalStateUnknown; test setup is wrong")
		}
		if got := rec.take(); !slices.Equal(got, keys("foo-1")) {
			t.Errorf("tombstoned delete enqueued %v, want the owner foo-1", got)
		}
	})
}

func TestFor_EnqueuesOwnKeyForEventsPassingThePredicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := cm("a", rv("2"), lbl("app", "web"))
		b := cm("b", rv("3"), lbl("app", "db"))
		src := &scripted{initial: []*corev1.ConfigMap{a, b}, events: make(chan []watcher.Event[*corev1.ConfigMap])}
		rec, stop := runWithInformer(t, src, func(inf *informer.Informer[*corev1.ConfigMap]) []controller.Source[cache.Key] {
			return []controller.Source[cache.Key]{controller.For(inf,
				controller.Filter(func(c *corev1.ConfigMap) bool { return c.Labels["app"] == "web" }),
				controller.AnnotationsChanged)}
		})
		defer stop()
		if got := rec.take(); !slices.Equal(got, keys("a")) {
			t.Errorf("initial list enqueued %v, want a", got)
		}
		src.events <- ev(watcher.Modified, cm("a", rv("4"), lbl("app", "web"), lbl("x", "1")))
		synctest.Wait()
		if got := rec.take(); len(got) != 0 {
			t.Errorf("a label-only change enqueued %v, want nothing (AnnotationsChanged)", got)
		}
		src.events <- ev(watcher.Modified, cm("a", rv("5"), lbl("app", "web"), ann("y", "1")))
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, keys("a")) {
			t.Errorf("annotation change enqueued %v, want a", got)
		}
		src.events <- ev(watcher.Deleted, b)
		synctest.Wait()
		if got := rec.take(); len(got) != 0 {
			t.Errorf("delete of a filtered object enqueued %v, want nothing", got)
		}
	})
}

func TestWatches_EnqueuesMappedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{events: make(chan []watcher.Event[*corev1.ConfigMap])}
		rec, stop := runWithInformer(t, src, func(inf *informer.Informer[*corev1.ConfigMap]) []controller.Source[cache.Key] {
			return []controller.Source[cache.Key]{controller.Watches(inf, func(c *corev1.ConfigMap) []cache.Key {
				return keys(c.Labels["target-1"], c.Labels["target-2"])
			})}
		})
		defer stop()
		src.events <- ev(watcher.Added, cm("m", rv("2"), lbl("target-1", "t1"), lbl("target-2", "t2")))
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, keys("t1", "t2")) {
			t.Errorf("enqueued %v, want t1 and t2", got)
		}
	})
}

// addRecorder is a controller.Queue that records each add with its
// priority, and whether the informer's cache already held the object's
// state when the add came.
type addRecorder struct {
	lister cache.Lister[*corev1.ConfigMap]
	mu     sync.Mutex
	adds   []string
}

func (q *addRecorder) record(k cache.Key, priority int) {
	rv := "absent"
	if o, ok := q.lister.Get(k.Namespace, k.Name); ok {
		rv = o.ResourceVersion
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.adds = append(q.adds, fmt.Sprintf("%s prio=%d cache@%s", k.Name, priority, rv))
}

func (q *addRecorder) Add(k cache.Key)                       { q.record(k, 0) }
func (q *addRecorder) AddWithPriority(k cache.Key, p int)    { q.record(k, p) }
func (q *addRecorder) AddAfter(k cache.Key, _ time.Duration) { q.record(k, 0) }

func (q *addRecorder) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.adds
	q.adds = nil
	slices.Sort(out)
	return out
}

func TestFor_EnqueuesOnTheInformersGoroutineReplaysAtLowPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{initial: []*corev1.ConfigMap{cm("a", rv("1"))}, events: make(chan []watcher.Event[*corev1.ConfigMap])}
		inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- inf.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("informer Start: %v", err)
			}
		}()
		synctest.Wait()

		q := &addRecorder{lister: inf.Lister()}
		before := runtime.NumGoroutine()
		sub, err := controller.For(inf).Register("test", q)
		if err != nil {
			t.Fatal(err)
		}
		// The informer had synced: its cache reaches the queue before
		// Register returns, as replays.
		if got, want := q.take(), []string{fmt.Sprintf("a prio=%d cache@1", controller.LowPriority)}; !slices.Equal(got, want) {
			t.Errorf("registering enqueued %v, want %v", got, want)
		}
		if err := sub.WaitForSync(t.Context()); err != nil {
			t.Errorf("WaitForSync: %v", err)
		}
		synctest.Wait()
		if after := runtime.NumGoroutine(); after != before {
			t.Errorf("a source started %d goroutines, want none", after-before)
		}

		src.events <- ev(watcher.Modified, cm("a", rv("2")))
		src.events <- ev(watcher.Added, cm("b", rv("3")))
		synctest.Wait()
		if got, want := q.take(), []string{"a prio=0 cache@2", "b prio=0 cache@3"}; !slices.Equal(got, want) {
			t.Errorf("changes enqueued %v, want %v: at normal priority, once the cache holds them", got, want)
		}
		sub.Remove()
		<-sub.Done()
		src.events <- ev(watcher.Modified, cm("a", rv("4")))
		synctest.Wait()
		if got := q.take(); len(got) != 0 {
			t.Errorf("a removed source enqueued %v", got)
		}
	})
}
