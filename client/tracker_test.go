package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
)

var cmGR = schema.GroupResource{Resource: "configmaps"}

func key(ns, name string) cache.Key { return cache.Key{Namespace: ns, Name: name} }

func TestWriteTracker_KeepsNewestWriteAndForgetsOnlyWhatWasReached(t *testing.T) {
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "a"), "10")
	tr.Record(cmGR, key("ns", "a"), "9") // an older response arriving late
	if w, _ := tr.Pending(cmGR, key("ns", "a")); w.ResourceVersion != "10" {
		t.Fatalf("pending rv %q after recording 10 then 9, want 10", w.ResourceVersion)
	}
	tr.Record(cmGR, key("ns", "a"), "100") // 100 > 10 numerically, < lexically
	if w, _ := tr.Pending(cmGR, key("ns", "a")); w.ResourceVersion != "100" {
		t.Fatalf("pending rv %q after recording 100, want 100 (numeric order)", w.ResourceVersion)
	}
	tr.Forget(cmGR, client.PendingWrite{Key: key("ns", "a"), ResourceVersion: "99"})
	if _, ok := tr.Pending(cmGR, key("ns", "a")); !ok {
		t.Fatal("Forget at 99 cleared a write at 100")
	}
	tr.Forget(cmGR, client.PendingWrite{Key: key("ns", "a")})
	if _, ok := tr.Pending(cmGR, key("ns", "a")); !ok {
		t.Fatal("Forget at an empty (unsynced) resourceVersion cleared a write")
	}
	tr.Forget(cmGR, client.PendingWrite{Key: key("ns", "a"), ResourceVersion: "101"})
	if _, ok := tr.Pending(cmGR, key("ns", "a")); ok || tr.Len() != 0 {
		t.Fatalf("Forget at 101 kept the write at 100 (len %d)", tr.Len())
	}
}

func TestWriteTracker_PendingInFiltersByNamespaceNewestFirst(t *testing.T) {
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("a", "x"), "5")
	tr.Record(cmGR, key("a", "y"), "12")
	tr.Record(cmGR, key("b", "z"), "7")
	tr.Record(schema.GroupResource{Resource: "secrets"}, key("a", "s"), "20")
	got := tr.PendingIn(cmGR, "a")
	if len(got) != 2 || got[0].ResourceVersion != "12" || got[1].ResourceVersion != "5" {
		t.Fatalf("PendingIn(a) = %+v, want y@12 then x@5", got)
	}
	if all := tr.PendingIn(cmGR, ""); len(all) != 3 {
		t.Fatalf("PendingIn(all) = %+v, want 3 writes", all)
	}
}

func TestWriteTracker_DoesNotRecordUnparsableResourceVersionAndWarns(t *testing.T) {
	var logs bytes.Buffer
	tr := client.NewWriteTracker(slog.New(slog.NewTextHandler(&logs, nil)))
	tr.Record(cmGR, key("ns", "a"), "not-a-number")
	if tr.Len() != 0 {
		t.Fatal("an unparsable resourceVersion was recorded; reads would wait for it until MaxWait")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "not-a-number") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
}

func TestWriteTracker_NilTrackerIsANoOp(t *testing.T) {
	var tr *client.WriteTracker
	tr.Record(cmGR, key("ns", "a"), "1")
	if _, ok := tr.Pending(cmGR, key("ns", "a")); ok || tr.Len() != 0 || tr.PendingIn(cmGR, "") != nil {
		t.Fatal("nil tracker reported a pending write")
	}
}

func cm(ns, name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + name), ResourceVersion: rv}}
}

// These run against a real cache.Store without an API server: the writer
// stands in for the informer.

func TestCachedReader_GetWaitsForTrackedWriteThenReturnsIt(t *testing.T) {
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	w.Replace([]*corev1.ConfigMap{cm("ns", "a", "5")}, "5")
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "a"), "8")
	sc := &heldCache[*corev1.ConfigMap]{Store: store, waiting: make(chan struct{}, 1)}
	sc.hold() // no reflector here: only to get the waiting signal
	r := client.NewCachedReader[*corev1.ConfigMap](sc, tr, cmGR, client.ReaderOptions{MaxWait: 30 * time.Second})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type result struct {
		rv  string
		err error
	}
	res := make(chan result, 1)
	go func() {
		obj, err := r.Get(ctx, "ns", "a")
		if err != nil {
			res <- result{err: err}
			return
		}
		res <- result{rv: obj.ResourceVersion}
	}()
	recv(t, sc.waiting, "Get to wait for the store")
	// An unrelated event that moves the store, but not past 8, must not
	// end the wait (Get would return a at 5); the write itself must.
	w.Apply(cm("ns", "other", "7"), "7")
	w.Apply(cm("ns", "a", "8"), "8")
	select {
	case got := <-res:
		if got.err != nil || got.rv != "8" {
			t.Fatalf("Get = rv %q, %v; want the written rv 8", got.rv, got.err)
		}
	case <-ctx.Done():
		t.Fatal("Get did not return after the store reached the write")
	}
	if tr.Len() != 0 {
		t.Fatalf("tracker still holds %d writes after the read confirmed them", tr.Len())
	}
}

func TestCachedReader_GetOfUntrackedKeyDoesNotWait(t *testing.T) {
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	w.Replace([]*corev1.ConfigMap{cm("ns", "a", "5")}, "5")
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "b"), "9") // another key
	// A MaxWait of a nanosecond: any wait at all fails.
	r := client.NewCachedReader[*corev1.ConfigMap](store, tr, cmGR, client.ReaderOptions{MaxWait: time.Nanosecond})
	if obj, err := r.Get(t.Context(), "ns", "a"); err != nil || obj.ResourceVersion != "5" {
		t.Fatalf("Get of an untracked key = %v, %v; want rv 5 at once", obj, err)
	}
	if _, err := r.Get(t.Context(), "ns", "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing key: got %v, want NotFound", err)
	}
	if _, err := r.Get(t.Context(), "ns", "b"); !errors.Is(err, client.ErrCacheStale) {
		t.Fatalf("Get of a tracked key the store lacks: got %v, want ErrCacheStale", err)
	}
}

func TestCachedReader_ReturnsCallerCancellationNotStale(t *testing.T) {
	store, _, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "a"), "3")
	r := client.NewCachedReader[*corev1.ConfigMap](store, tr, cmGR, client.ReaderOptions{MaxWait: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = r.Get(ctx, "ns", "a")
	if !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrCacheStale) {
		t.Fatalf("Get with a cancelled context: got %v, want context.Canceled and not ErrCacheStale", err)
	}
}

func TestCachedReader_ListWaitsForEveryPendingWriteInNamespace(t *testing.T) {
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	w.Replace(nil, "1")
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "a"), "2")
	tr.Record(cmGR, key("ns", "b"), "3")
	tr.Record(cmGR, key("elsewhere", "c"), "4")
	r := client.NewCachedReader[*corev1.ConfigMap](store, tr, cmGR, client.ReaderOptions{MaxWait: 30 * time.Second})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := make(chan int, 1)
	go func() {
		items, err := r.List(ctx, "ns", nil)
		if err != nil {
			t.Errorf("List: %v", err)
		}
		res <- len(items)
	}()
	w.Apply(cm("ns", "a", "2"), "2")
	w.Apply(cm("ns", "b", "3"), "3")
	select {
	case n := <-res:
		if n != 2 {
			t.Fatalf("List returned %d objects, want a and b", n)
		}
	case <-ctx.Done():
		t.Fatal("List did not return after the store reached both writes")
	}
	// The write in the other namespace was not waited for, nor cleared.
	if _, ok := tr.Pending(cmGR, key("elsewhere", "c")); !ok {
		t.Fatal("List in ns cleared a write in another namespace")
	}
}

func TestCachedReader_GetAfterDeleteWithoutResourceVersionWaitsUntilObjectGone(t *testing.T) {
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	// 99: the wait for "any change" must carry to 100.
	w.Replace([]*corev1.ConfigMap{cm("ns", "a", "98"), cm("ns", "b", "99")}, "99")
	tr := client.NewWriteTracker(nil)
	tr.RecordGone(cmGR, key("ns", "a"), "u-a")
	tr.RecordGone(cmGR, key("ns", "b"), "u-b")
	sc := &heldCache[*corev1.ConfigMap]{Store: store, waiting: make(chan struct{}, 1)}
	sc.hold() // no reflector here: only to get the waiting signal
	r := client.NewCachedReader[*corev1.ConfigMap](sc, tr, cmGR, client.ReaderOptions{MaxWait: 30 * time.Second})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := r.Get(ctx, "ns", "a")
		res <- err
	}()
	recv(t, sc.waiting, "Get to wait for the delete")
	w.Apply(cm("ns", "other", "100"), "100") // the store moves, a is still there
	w.Delete(cm("ns", "a", "101"), "101")
	if err := recv(t, res, "Get after the delete reached the store"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after own delete: got %v, want NotFound", err)
	}

	// b was re-created by someone else (another UID): that counts as seen.
	w.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "other", ResourceVersion: "102"}}, "102")
	if obj, err := r.Get(ctx, "ns", "b"); err != nil || obj.UID != "other" {
		t.Fatalf("Get of a key re-created by someone else = %v, %v; want the new object", obj, err)
	}
	if tr.Len() != 0 {
		t.Fatalf("tracker still holds %d writes", tr.Len())
	}
}

// racyCache is a real cache.Store that applies a scripted change right after
// the reader's first look at it: the change lands between the reader's check
// of its write and its wait, the window a wait must not lose.
type racyCache struct {
	*cache.Store[*corev1.ConfigMap]
	once    sync.Once
	between func()
}

func (c *racyCache) Get(namespace, name string) (*corev1.ConfigMap, bool) {
	obj, ok := c.Store.Get(namespace, name)
	c.once.Do(c.between)
	return obj, ok
}

func TestCachedReader_AChangeBetweenTheCheckAndTheWaitIsNotMissed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// record the write in tr; between applies its event to w.
		record  func(tr *client.WriteTracker)
		between func(w *cache.Writer[*corev1.ConfigMap])
		wantErr func(error) bool
	}{{
		// The delete's event is the last event in a quiet namespace:
		// nothing else would move the cache for MaxWait.
		name:    "delete",
		record:  func(tr *client.WriteTracker) { tr.RecordGone(cmGR, key("ns", "a"), "u-a") },
		between: func(w *cache.Writer[*corev1.ConfigMap]) { w.Delete(cm("ns", "a", "11"), "11") },
		wantErr: apierrors.IsNotFound,
	}, {
		name:    "update",
		record:  func(tr *client.WriteTracker) { tr.Record(cmGR, key("ns", "a"), "11") },
		between: func(w *cache.Writer[*corev1.ConfigMap]) { w.Apply(cm("ns", "a", "11"), "11") },
		wantErr: func(err error) bool { return err == nil },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
				if err != nil {
					t.Fatal(err)
				}
				w.Replace([]*corev1.ConfigMap{cm("ns", "a", "10")}, "10")
				tr := client.NewWriteTracker(nil)
				tc.record(tr)
				rc := &racyCache{Store: store, between: func() { tc.between(w) }}
				r := client.NewCachedReader[*corev1.ConfigMap](rc, tr, cmGR, client.ReaderOptions{})
				began := time.Now()
				_, err = r.Get(t.Context(), "ns", "a")
				if !tc.wantErr(err) {
					t.Fatalf("Get after its write's event landed between check and wait: %v", err)
				}
				// Virtual time: any wait for MaxWait shows here, not on the clock.
				if waited := time.Since(began); waited != 0 {
					t.Fatalf("Get waited %v for an event the cache had already applied", waited)
				}
				if tr.Len() != 0 {
					t.Fatalf("the write is still pending after Get confirmed it")
				}
			})
		})
	}
}

func TestWriteTracker_WroteRemembersTheLatestWritesAfterTheCacheSawThem(t *testing.T) {
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "a"), "10")
	tr.Forget(cmGR, client.PendingWrite{Key: key("ns", "a"), ResourceVersion: "10"})
	if !tr.Wrote("ns", "a", "10") {
		t.Error("Wrote(ns, a, 10) = false after the write was seen by a cache, want true: every watch event of it is the client's")
	}
	if tr.Wrote("ns", "a", "11") || tr.Wrote("ns", "b", "10") || tr.Wrote("ns", "a", "") {
		t.Error("Wrote is true for a write the tracker never recorded")
	}
	for i := range 5000 {
		tr.Record(cmGR, key("ns", "many"), strconv.Itoa(100+i))
	}
	if tr.Wrote("ns", "a", "10") || !tr.Wrote("ns", "many", "5099") {
		t.Error("Wrote does not keep the latest writes only, a few thousand of them")
	}
	var none *client.WriteTracker
	if none.Wrote("ns", "a", "10") {
		t.Error("a nil tracker reports a write")
	}
}

// A write whose key is never read back (its watch event only woke a
// skipped reconcile) is dropped by the next read of its resource once the
// cache has passed it; writes the cache has not reached, and deletes with
// no resourceVersion, stay.
func TestCachedReader_ReadOfAnyKeyDropsWritesItsCacheHasPassed(t *testing.T) {
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	w.Replace([]*corev1.ConfigMap{cm("ns", "a", "5"), cm("ns", "b", "6")}, "6")
	tr := client.NewWriteTracker(nil)
	tr.Record(cmGR, key("ns", "a"), "5")
	tr.Record(cmGR, key("other", "b"), "6")
	tr.Record(cmGR, key("ns", "later"), "9")
	tr.RecordGone(cmGR, key("ns", "gone"), "u-gone")
	secrets := schema.GroupResource{Resource: "secrets"}
	tr.Record(secrets, key("ns", "s"), "4")
	r := client.NewCachedReader[*corev1.ConfigMap](store, tr, cmGR, client.ReaderOptions{MaxWait: 30 * time.Second})

	if _, err := r.Get(t.Context(), "ns", "unwritten"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an unwritten key = %v, want NotFound", err)
	}
	for _, k := range []cache.Key{key("ns", "a"), key("other", "b")} {
		if p, ok := tr.Pending(cmGR, k); ok {
			t.Errorf("write %+v still pending after a read of a cache at 6", p)
		}
	}
	if p, ok := tr.Pending(cmGR, key("ns", "later")); !ok || p.ResourceVersion != "9" {
		t.Errorf("write at 9 dropped by a read of a cache at 6 (%+v, %v)", p, ok)
	}
	if _, ok := tr.Pending(cmGR, key("ns", "gone")); !ok {
		t.Error("a delete without a resourceVersion was dropped by a read of another key")
	}
	if _, ok := tr.Pending(secrets, key("ns", "s")); !ok {
		t.Error("a read of configmaps dropped a pending write of secrets")
	}

	w.Apply(cm("ns", "x", "9"), "9")
	if _, err := r.List(t.Context(), "other", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Pending(cmGR, key("ns", "later")); ok {
		t.Error("write at 9 still pending after a List of another namespace in a cache at 9")
	}
	if tr.Len() != 2 {
		t.Errorf("tracker holds %d writes, want 2 (the delete and the secret)", tr.Len())
	}
}
