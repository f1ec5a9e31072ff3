package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kloop-dev/kloop/controller"
)

func TestControllerStatus_KeepsTheLatestReconcilesWithCausesAndOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			time.Sleep(time.Millisecond) // virtual
			switch key {
			case "bad":
				return controller.Result{}, controller.TerminalError(errors.New("broken spec"))
			case "later":
				return controller.Result{RequeueAfter: time.Hour}, nil
			}
			return controller.Result{}, nil
		})
		h := start[string](t, rec, controller.Options[string]{Name: "hist"})
		defer h.shutdown()
		for _, k := range []string{"bad", "later", "ok"} {
			h.c.Enqueue(k)
			time.Sleep(time.Second) // virtual: the reconcile is done
			synctest.Wait()
		}

		s := h.c.Status()
		if len(s.Recent) != 3 {
			t.Fatalf("Recent = %+v, want 3 reconciles", s.Recent)
		}
		want := []struct{ key, outcome, err string }{
			{"ok", controller.OutcomeSuccess, ""},
			{"later", controller.OutcomeRequeueAfter, ""},
			{"bad", controller.OutcomeError, "terminal error: broken spec"},
		}
		for i, w := range want {
			r := s.Recent[i]
			if r.Key != w.key || r.Outcome != w.outcome || r.Error != w.err || r.Duration != time.Millisecond ||
				len(r.Causes) != 1 || r.Causes[0].String() != "Enqueue" || r.CausesTotal != 1 {
				t.Errorf("Recent[%d] = %+v, want %s %s %q after 1ms, caused by Enqueue", i, r, w.key, w.outcome, w.err)
			}
		}
		if !s.Recent[2].Terminal || len(s.RecentErrors) != 1 || s.RecentErrors[0].Causes[0].Source != "Enqueue" {
			t.Errorf("the failed reconcile is not terminal or not in RecentErrors with its causes: %+v, %+v", s.Recent[2], s.RecentErrors)
		}
		hist := s.KeyHistory()
		if len(hist) != 3 || len(hist["bad"]) != 1 || hist["later"][0].Outcome != controller.OutcomeRequeueAfter {
			t.Errorf("KeyHistory() = %+v, want one reconcile of each of the 3 keys", hist)
		}
	})
}

func TestControllerStatus_HistoryIsBoundedPerControllerAndPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls int
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			calls++
			return controller.Result{}, nil
		})
		h := start[string](t, rec, controller.Options[string]{Name: "bounded"})
		defer h.shutdown()
		// "hot" once, 300 other keys (hot is forgotten, the least recent of
		// 257), then "hot" 8 times: it is kept again, with its last 5.
		h.c.Enqueue("hot")
		synctest.Wait()
		for i := range 300 {
			h.c.Enqueue(fmt.Sprintf("k%03d", i))
			synctest.Wait()
		}
		for range 8 {
			h.c.Enqueue("hot")
			synctest.Wait()
		}
		if calls != 309 {
			t.Fatalf("%d reconciles, want 309", calls)
		}
		s := h.c.Status()
		if len(s.Recent) != controller.RecentReconciles || s.Recent[0].Key != "hot" || s.Recent[7].Key != "hot" || s.Recent[8].Key != "k299" {
			t.Errorf("Recent has %d, newest %q, 9th %q; want %d, hot then k299", len(s.Recent), s.Recent[0].Key, s.Recent[8].Key, controller.RecentReconciles)
		}
		hist := s.KeyHistory()
		if len(hist) != 256 {
			t.Errorf("KeyHistory() has %d keys, want the 256 most recent", len(hist))
		}
		if got := len(hist["hot"]); got != 5 {
			t.Errorf("hot has %d reconciles kept, want 5", got)
		}
		if _, ok := hist["k045"]; !ok {
			t.Errorf("k045, the 256th most recent key, was forgotten")
		}
		if _, ok := hist["k044"]; ok {
			t.Errorf("k044, the 257th most recent key, is still kept")
		}
	})
}
