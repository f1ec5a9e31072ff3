package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/watcher"
)

// heldCache is a real cache.Store fed by a real reflector from the API
// server, with a gate the test can close to hold the watch events back (a
// cache that lags), and a signal when a reader starts waiting on it.
type heldCache[T watcher.Object] struct {
	*cache.Store[T]
	// waiting gets a value when a reader takes Changed while the cache is
	// held: it is about to look at its write and, the cache being held,
	// will wait. (Tests without a reflector hold too, to get the signal.)
	waiting chan struct{}

	mu   sync.Mutex
	gate chan struct{} // non-nil: events wait until it is closed
}

func (h *heldCache[T]) Changed() <-chan struct{} {
	h.mu.Lock()
	held := h.gate != nil
	h.mu.Unlock()
	if held {
		select {
		case h.waiting <- struct{}{}:
		default:
		}
	}
	return h.Store.Changed()
}

// hold makes the cache stop applying events until release.
func (h *heldCache[T]) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate = make(chan struct{})
}

func (h *heldCache[T]) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

// startConfigMapCache runs a reflector for the ConfigMaps in ns into a store
// until the test ends, and returns once the store has its first snapshot.
func startConfigMapCache(t *testing.T, env *testenv.Env, ns string) *heldCache[*corev1.ConfigMap] {
	t.Helper()
	lw, err := watcher.FromResource[*corev1.ConfigMap](env.Config, clientgoscheme.Scheme, configMapGVR, watcher.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	h := &heldCache[*corev1.ConfigMap]{Store: store, waiting: make(chan struct{}, 1)}
	r := watcher.NewReflector(lw, watcher.Options{
		Name:       "configmaps-" + ns,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer: prometheus.NewRegistry(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	synced := make(chan struct{})
	var snapshot []*corev1.ConfigMap
	emit := func(ev watcher.Event[*corev1.ConfigMap]) {
		h.mu.Lock()
		gate := h.gate
		h.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		switch ev.Type {
		case watcher.Added, watcher.Modified:
			w.Apply(ev.Object, ev.Object.GetResourceVersion())
		case watcher.Deleted:
			w.Delete(ev.Object, ev.Object.GetResourceVersion())
		case watcher.Bookmark:
			w.Bookmark(ev.ResourceVersion)
		case watcher.RelistStart:
			snapshot = nil
		case watcher.RelistItem:
			snapshot = append(snapshot, ev.Object)
		case watcher.RelistDone:
			w.Replace(snapshot, ev.ResourceVersion)
			snapshot = nil
			select {
			case <-synced:
			default:
				close(synced)
			}
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, emit) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reflector: %v", err)
		}
	})
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
		t.Fatalf("cache of configmaps in %s did not sync within 30s (last error %v)", ns, r.LastError())
	}
	return h
}

func recv[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out after 30s waiting for %s", what)
		panic("unreachable")
	}
}

type getResult struct {
	obj *corev1.ConfigMap
	err error
}

func testCachedGetWaitsForUpdate(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "ryw-update")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Data: map[string]string{"v": "1"}}); err != nil {
		t.Fatal(err)
	}
	hc := startConfigMapCache(t, env, ns)
	reader := cms.Cached(hc, client.ReaderOptions{MaxWait: 30 * time.Second})

	cur, err := reader.Get(ctx, ns, "a")
	if err != nil || cur.Data["v"] != "1" {
		t.Fatalf("cached get after sync: %v, %+v", err, cur)
	}

	hc.hold()
	upd := cache.Copy(cur)
	upd.Data["v"] = "2"
	written, err := cms.Update(ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	// A plain cache read now returns the state before our own write.
	if stale, _ := hc.Get(ns, "a"); stale.Data["v"] != "1" {
		t.Fatalf("held cache already has v=%s; the test cannot show a wait", stale.Data["v"])
	}

	res := make(chan getResult, 1)
	go func() {
		obj, err := reader.Get(ctx, ns, "a")
		res <- getResult{obj, err}
	}()
	recv(t, hc.waiting, "the cached Get to wait for the cache")
	hc.release()
	got := recv(t, res, "the cached Get to return after the cache caught up")
	if got.err != nil {
		t.Fatalf("cached get: %v", got.err)
	}
	if got.obj.Data["v"] != "2" || got.obj.ResourceVersion != written.ResourceVersion {
		t.Fatalf("cached get returned v=%s at rv %s, want our write v=2 at rv %s", got.obj.Data["v"], got.obj.ResourceVersion, written.ResourceVersion)
	}
	if pending := c.Tracker().PendingIn(configMapGVR.GroupResource(), ns); len(pending) != 0 {
		t.Errorf("tracker holds %+v after the cache confirmed them, want nothing", pending)
	}
}

func testCachedReadsCreateDelete(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "ryw-create-delete")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	hc := startConfigMapCache(t, env, ns)
	reader := cms.Cached(hc, client.ReaderOptions{MaxWait: 30 * time.Second})

	// "Create if missing", run twice: the second run must see the first
	// run's object, or it would create a duplicate (here: AlreadyExists).
	ensure := func() error {
		if _, err := reader.Get(ctx, ns, "made"); !apierrors.IsNotFound(err) {
			return err
		}
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made"}})
		return err
	}
	hc.hold()
	if err := ensure(); err != nil {
		t.Fatalf("first ensure: %v", err)
	}
	second := make(chan error, 1)
	go func() { second <- ensure() }()
	recv(t, hc.waiting, "the second ensure to wait for the cache")
	hc.release()
	if err := recv(t, second, "the second ensure"); err != nil {
		t.Fatalf("second ensure: %v (it acted on a cache from before the first create)", err)
	}

	// List waits for a pending create too.
	hc.hold()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "listed"}}); err != nil {
		t.Fatal(err)
	}
	listed := make(chan []*corev1.ConfigMap, 1)
	go func() {
		items, err := reader.List(ctx, ns, nil)
		if err != nil {
			t.Errorf("cached list: %v", err)
		}
		listed <- items
	}()
	recv(t, hc.waiting, "the cached List to wait for the cache")
	hc.release()
	if items := recv(t, listed, "the cached List"); len(items) != 2 {
		t.Fatalf("cached list returned %d objects, want made and listed", len(items))
	}

	// A delete: the cached Get waits until the cache saw it.
	hc.hold()
	if err := cms.Delete(ctx, ns, "made", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := hc.Get(ns, "made"); !ok {
		t.Fatal("held cache already lost the deleted object; the test cannot show a wait")
	}
	res := make(chan error, 1)
	go func() {
		_, err := reader.Get(ctx, ns, "made")
		res <- err
	}()
	recv(t, hc.waiting, "the cached Get to wait for the delete")
	hc.release()
	if err := recv(t, res, "the cached Get after a delete"); !apierrors.IsNotFound(err) {
		t.Fatalf("cached get after own delete: got %v, want NotFound", err)
	}
}

func testCachedGetStale(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "ryw-stale")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	hc := startConfigMapCache(t, env, ns)
	reader := cms.Cached(hc, client.ReaderOptions{MaxWait: 300 * time.Millisecond})

	hc.hold()
	written, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reader.Get(ctx, ns, "late")
	var se *client.StaleError
	if !errors.Is(err, client.ErrCacheStale) || !errors.As(err, &se) {
		t.Fatalf("cached get with the cache held back: got %v, want ErrCacheStale", err)
	}
	if se.Want != "resourceVersion "+written.ResourceVersion || se.Key != (cache.Key{Namespace: ns, Name: "late"}) {
		t.Errorf("StaleError %+v: want key %s/late at rv %s", se, ns, written.ResourceVersion)
	}
	if _, err := reader.List(ctx, ns, nil); !errors.Is(err, client.ErrCacheStale) {
		t.Fatalf("cached list with the cache held back: got %v, want ErrCacheStale", err)
	}

	// Once the cache catches up the write is still waited for, then read.
	hc.release()
	reader = cms.Cached(hc, client.ReaderOptions{MaxWait: 30 * time.Second})
	got, err := reader.Get(ctx, ns, "late")
	if err != nil || got.ResourceVersion != written.ResourceVersion {
		t.Fatalf("cached get after release: %v, %+v", err, got)
	}
}

type listResult struct {
	objs []*corev1.ConfigMap
	err  error
}

func names(objs []*corev1.ConfigMap) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}

// ListControlledBy waits for the writes that can change which objects an
// owner controls, and for no other write in the namespace.
func testCachedListControlledBy(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "ryw-owned")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	owners := map[string]*corev1.ConfigMap{}
	for _, name := range []string{"owner-a", "owner-b"} {
		o, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		owners[name] = o
	}
	controlledBy := func(name, owner string) *corev1.ConfigMap {
		ref := metav1.NewControllerRef(owners[owner], corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{*ref}}}
	}
	hc := startConfigMapCache(t, env, ns)
	reader := cms.Cached(hc, client.ReaderOptions{MaxWait: 30 * time.Second})
	a := owners["owner-a"].UID
	list := func() <-chan listResult {
		res := make(chan listResult, 1)
		go func() {
			objs, err := reader.ListControlledBy(ctx, ns, a)
			res <- listResult{objs, err}
		}()
		return res
	}

	// Another owner's object, written and not yet in the cache: no wait.
	hc.hold()
	if _, err := cms.Create(ctx, controlledBy("of-b", "owner-b")); err != nil {
		t.Fatal(err)
	}
	got := recv(t, list(), "ListControlledBy with only another owner's write pending")
	if got.err != nil || len(got.objs) != 0 {
		t.Fatalf("ListControlledBy(owner-a) = %v, %v; want none, at once", names(got.objs), got.err)
	}
	select {
	case <-hc.waiting:
		t.Fatal("ListControlledBy(owner-a) waited for owner-b's write")
	default:
	}

	// The owner's own object: waited for, then listed.
	mine, err := cms.Create(ctx, controlledBy("of-a", "owner-a"))
	if err != nil {
		t.Fatal(err)
	}
	res := list()
	recv(t, hc.waiting, "ListControlledBy to wait for owner-a's new object")
	hc.release()
	got = recv(t, res, "ListControlledBy after the cache caught up")
	if got.err != nil || len(got.objs) != 1 || got.objs[0].Name != "of-a" {
		t.Fatalf("ListControlledBy(owner-a) = %v, %v; want [of-a]", names(got.objs), got.err)
	}

	// A write that takes the object from the owner: the cache still has it
	// controlled, so the list waits and then leaves it out.
	hc.hold()
	orphan := cache.Copy(mine)
	orphan.OwnerReferences = nil
	if _, err := cms.Update(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	res = list()
	recv(t, hc.waiting, "ListControlledBy to wait for the write that orphaned of-a")
	hc.release()
	if got = recv(t, res, "ListControlledBy after the orphaning reached the cache"); got.err != nil || len(got.objs) != 0 {
		t.Fatalf("ListControlledBy(owner-a) = %v, %v; want none once of-a is orphaned", names(got.objs), got.err)
	}
}
