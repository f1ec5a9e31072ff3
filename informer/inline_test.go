package informer

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// events records the events a handler gets, as strings, and whether each
// came while the informer was applying a change (holding dispatchMu).
type events struct {
	inf     *Informer[*corev1.ConfigMap]
	mu      sync.Mutex
	got     []string
	outside int // calls made while dispatchMu was free
}

func (r *events) OnEvent(e cache.Event[*corev1.ConfigMap]) {
	applying := !r.inf.dispatchMu.TryLock()
	if !applying {
		r.inf.dispatchMu.Unlock()
	}
	s := fmt.Sprintf("%s %s@%s", e.Kind, e.Object().Name, e.Object().ResourceVersion)
	if e.Kind == cache.Updated {
		s = fmt.Sprintf("%s %s@%s>%s", e.Kind, e.New.Name, e.Old.ResourceVersion, e.New.ResourceVersion)
	}
	if e.Replay {
		s += " replay"
	}
	if e.FinalStateUnknown {
		s += " final-state-unknown"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
	if !applying {
		r.outside++
	}
}

func (r *events) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func TestInformer_InlineHandlerHearsEachChangeWhileItIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec *events
		var reg *Registration
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			rec = &events{inf: inf}
			reg = add(t, inf, rec, HandlerOptions{Inline: true})
		})
		defer h.stop()

		h.src.relist("2", cm("a", "1", "1"))
		synctest.Wait()
		if !closed(reg.Synced()) {
			t.Fatal("inline registration not synced once the first snapshot was applied")
		}
		equal(t, rec.take(), []string{"Added a@1 replay"})

		// No queue of its own to merge in: it hears every change the cache
		// goes through.
		for _, e := range []watcher.Event[*corev1.ConfigMap]{ev(watcher.Modified, cm("a", "1", "3")), ev(watcher.Modified, cm("a", "1", "4")),
			ev(watcher.Added, cm("b", "2", "5")), ev(watcher.Deleted, cm("a", "1", "6"))} {
			h.src.send(e)
			synctest.Wait()
		}
		equal(t, rec.take(), []string{"Updated a@1>3", "Updated a@3>4", "Added b@5", "Deleted a@6"})

		h.src.relist("9")
		synctest.Wait()
		equal(t, rec.take(), []string{"Deleted b@5 final-state-unknown"})
		if rec.outside != 0 {
			t.Errorf("%d events reached the inline handler outside the informer's applying of a change", rec.outside)
		}
	})
}

func TestInformer_InlineHandlerAddedLaterHasTheCacheWhenAddHandlerReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{})
		defer h.stop()
		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait()

		before := runtime.NumGoroutine()
		rec := &events{inf: h.inf}
		reg := add(t, h.inf, rec, HandlerOptions{Inline: true})
		got := rec.take()
		slices.Sort(got)
		equal(t, got, []string{"Added a@1 replay", "Added b@2 replay"})
		if !closed(reg.Synced()) {
			t.Error("inline registration added after the sync is not synced when AddHandler returns")
		}
		synctest.Wait()
		if after := runtime.NumGoroutine(); after != before {
			t.Errorf("an inline registration started %d goroutines, want none", after-before)
		}
		h.src.send(ev(watcher.Modified, cm("b", "2", "3")))
		synctest.Wait()
		equal(t, rec.take(), []string{"Updated b@2>3"})
	})
}

func TestInformer_InlineHandlerRemovedFromItselfIsCalledNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reg *Registration
		calls := 0
		h := start(t, Options[*corev1.ConfigMap]{})
		defer h.stop()
		reg = add(t, h.inf, HandlerFunc[*corev1.ConfigMap](func(cache.Event[*corev1.ConfigMap]) {
			calls++ // inline: one call at a time, on the informer's goroutine
			reg.Remove()
			if closed(reg.Done()) {
				t.Error("Done closed while the call that removed the handler still runs")
			}
		}), HandlerOptions{Inline: true})
		h.src.relist("3", cm("a", "1", "1"), cm("b", "2", "2"), cm("c", "3", "3"))
		synctest.Wait() // a deadlock here fails the bubble
		if !closed(reg.Done()) {
			t.Fatal("Done not closed after the call that removed the handler returned")
		}
		h.src.send(ev(watcher.Added, cm("d", "4", "4")))
		synctest.Wait()
		if calls != 1 {
			t.Fatalf("handler called %d times; the call that removed it must be the last", calls)
		}
		if st := h.inf.Status(); len(st.Handlers) != 0 {
			t.Errorf("Status lists %d handlers after the only one was removed", len(st.Handlers))
		}
	})
}

func TestInformer_InlineRegistrationIsDoneWhenTheInformerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reg *Registration
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			reg = add(t, inf, HandlerFunc[*corev1.ConfigMap](func(cache.Event[*corev1.ConfigMap]) {}), HandlerOptions{Inline: true, Name: "direct"})
		})
		h.src.relist("1", cm("a", "1", "1"))
		synctest.Wait()
		if st := h.inf.Status(); len(st.Handlers) != 1 || st.Handlers[0] != (HandlerStatus{Name: "direct", Synced: true, Inline: true}) {
			t.Errorf("Status handlers %+v, want the inline one, synced, nothing pending", st.Handlers)
		}
		if closed(reg.Done()) {
			t.Fatal("Done closed while the informer runs")
		}
		h.stop()
		if !closed(reg.Done()) {
			t.Fatal("Done not closed after the informer stopped")
		}
	})
}

func TestInformer_InlineHandlerCannotHaveAReplayInterval(t *testing.T) {
	inf, err := New[*corev1.ConfigMap](newFakeSource(), Options[*corev1.ConfigMap]{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = inf.AddHandler(HandlerFunc[*corev1.ConfigMap](func(cache.Event[*corev1.ConfigMap]) {}), HandlerOptions{Inline: true, ReplayInterval: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "ReplayInterval") {
		t.Fatalf("AddHandler with Inline and ReplayInterval: err = %v, want one that names ReplayInterval", err)
	}
}

func TestInformer_ReplayFlagsStateRedeliveredButNotChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec *events
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			rec = &events{inf: inf}
			add(t, inf, rec, HandlerOptions{ReplayInterval: time.Minute})
		})
		defer h.stop()
		h.src.relist("1", cm("a", "1", "1"))
		synctest.Wait()
		equal(t, rec.take(), []string{"Added a@1 replay"})

		time.Sleep(time.Minute) // virtual time: one replay interval
		synctest.Wait()
		equal(t, rec.take(), []string{"Updated a@1>1 replay"})

		h.src.send(ev(watcher.Added, cm("b", "2", "2")), ev(watcher.Modified, cm("a", "1", "3")))
		synctest.Wait()
		equal(t, rec.take(), []string{"Added b@2", "Updated a@1>3"})
	})
}

func TestMerge_AnUpdateIsAReplayOnlyIfEveryMergedUpdateWas(t *testing.T) {
	a1, a2, a3 := cm("a", "1", "1"), cm("a", "1", "2"), cm("a", "1", "3")
	for _, tc := range []struct {
		name       string
		p, n       note[*corev1.ConfigMap]
		wantReplay bool
	}{
		{"replay then replay", note[*corev1.ConfigMap]{kind: noteUpdate, old: a1, obj: a1, replay: true}, note[*corev1.ConfigMap]{kind: noteUpdate, old: a1, obj: a1, replay: true}, true},
		{"replay then change", note[*corev1.ConfigMap]{kind: noteUpdate, old: a1, obj: a1, replay: true}, note[*corev1.ConfigMap]{kind: noteUpdate, old: a1, obj: a2}, false},
		{"change then replay", note[*corev1.ConfigMap]{kind: noteUpdate, old: a1, obj: a2}, note[*corev1.ConfigMap]{kind: noteUpdate, old: a2, obj: a2, replay: true}, false},
		{"change then change", note[*corev1.ConfigMap]{kind: noteUpdate, old: a1, obj: a2}, note[*corev1.ConfigMap]{kind: noteUpdate, old: a2, obj: a3}, false},
	} {
		m, keep := merge(tc.p, tc.n)
		if !keep || m.kind != noteUpdate || m.replay != tc.wantReplay {
			t.Errorf("%s: merged to kind %d replay=%v keep=%v, want an update with replay=%v", tc.name, m.kind, m.replay, keep, tc.wantReplay)
		}
	}
}
