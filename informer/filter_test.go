package informer

import (
	"sync"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// view is a Filter whose answer the test changes: the names it keeps.
type view struct {
	mu   sync.Mutex
	keep map[string]bool
}

func newView(names ...string) *view {
	v := &view{keep: map[string]bool{}}
	v.set(names...)
	return v
}

func (v *view) set(names ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.keep)
	for _, n := range names {
		v.keep[n] = true
	}
}

func (v *view) filter(o *corev1.ConfigMap) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keep[o.Name]
}

func TestInformer_Filter_KeepsOnlyWhatItAccepts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newView("a", "c")
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{Filter: v.filter}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()
		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait()
		equal(t, rec.take(), []string{"add a@1 initial=true"})
		h.src.send(ev(watcher.Added, cm("c", "3", "3")), ev(watcher.Added, cm("d", "4", "4")), ev(watcher.Modified, cm("b", "2", "5")))
		synctest.Wait()
		equal(t, rec.take(), []string{"add c@3 initial=false"})
		if got := storeView(h.inf); got != "map[a:1 c:3]" {
			t.Errorf("cache %s", got)
		}
	})
}

// Narrowing the filter drops objects silently; widening it and relisting
// brings objects into view as adds marked initial, leaves unchanged ones
// unnotified, and a relist never reports a filtered-out object as deleted.
func TestInformer_RefilterAndRelist_MoveObjectsInAndOutOfViewWithoutDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newView("a", "b")
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{Filter: v.filter}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()
		h.src.relist("3", cm("a", "1", "1"), cm("b", "2", "2"), cm("c", "3", "3"))
		synctest.Wait()
		equal(t, rec.take(), []string{"add a@1 initial=true", "add b@2 initial=true"})

		// b leaves view: dropped from the cache, nobody told.
		v.set("a")
		if n := h.inf.refilter(); n != 1 {
			t.Errorf("Refilter dropped %d, want 1", n)
		}
		synctest.Wait()
		equal(t, rec.take(), nil)
		if got := storeView(h.inf); got != "map[a:1]" {
			t.Errorf("cache after Refilter %s", got)
		}
		// An event for b now is ignored too.
		h.src.send(ev(watcher.Modified, cm("b", "2", "4")))
		synctest.Wait()
		equal(t, rec.take(), nil)

		// c comes into view: the informer starts its source again and
		// the snapshot's c is an add marked initial; a is unchanged.
		v.set("a", "c")
		done := h.inf.relist()
		synctest.Wait()
		if closed(done) {
			t.Fatal("Relist done before a new snapshot")
		}
		h.src.relist("6", cm("a", "1", "1"), cm("b", "2", "4"), cm("c", "3", "5"))
		synctest.Wait()
		if !closed(done) {
			t.Fatal("Relist not done after the new snapshot was applied")
		}
		equal(t, rec.take(), []string{"add c@5 initial=true"})

		// A snapshot that lacks c after c left view (the selector narrowed
		// before Refilter was called) does not report c deleted.
		v.set("a")
		h.src.relist("7", cm("a", "1", "1"))
		synctest.Wait()
		equal(t, rec.take(), nil)
		if got := storeView(h.inf); got != "map[a:1]" {
			t.Errorf("cache %s", got)
		}
		// While a real delete still is one.
		h.src.send(ev(watcher.Deleted, cm("a", "1", "8")))
		synctest.Wait()
		equal(t, rec.take(), []string{"delete a@8 unknown=false"})
	})
}

// A Relist cut into a snapshot being emitted discards the partial one
// without a protocol warning, and an informer that stopped answers at once.
func TestInformer_Relist_DuringASnapshotAndAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		h.src.relist("1", cm("a", "1", "1"))
		h.src.send(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart}, ev(watcher.RelistItem, cm("x", "9", "2")))
		synctest.Wait() // the partial snapshot is queued
		done := h.inf.relist()
		// The stopped source has returned and the new one waits: an event
		// sent before that could be taken by the stopped one (its select
		// has the cancelled context and the event ready at once), which
		// emits it under the old epoch and cuts the new snapshot in two.
		synctest.Wait()
		h.src.relist("3", cm("a", "1", "1"), cm("b", "2", "3"))
		synctest.Wait()
		if !closed(done) {
			t.Fatal("Relist not done")
		}
		equal(t, rec.take(), []string{"add a@1 initial=true", "add b@3 initial=true"})
		if got := h.logs.String(); got != "" {
			t.Errorf("logs: %s", got)
		}
		h.stop()
		if !closed(h.inf.relist()) {
			t.Error("Relist after stop did not answer at once")
		}
	})
}
