package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

func TestControllerStatus_CountsResultsAndKeepsTheLatestErrorsNewestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := controller.ReconcilerFunc[cache.Key](func(ctx context.Context, key cache.Key) (controller.Result, error) {
			switch {
			case key.Name == "terminal":
				return controller.Result{}, controller.TerminalError(errors.New("cannot ever work"))
			case strings.HasPrefix(key.Name, "bad"):
				time.Sleep(20 * time.Millisecond) // virtual time
				return controller.Result{}, fmt.Errorf("%s is broken", key.Name)
			case key.Name == "later":
				return controller.Result{RequeueAfter: time.Hour}, nil
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[cache.Key]{Name: "st", Workers: 3, MaxRetries: 1})
		defer h.shutdown()
		for i := range 12 {
			h.c.Enqueue(cache.Key{Namespace: "ns", Name: fmt.Sprintf("bad-%02d", i)})
		}
		h.c.Enqueue(cache.Key{Namespace: "ns", Name: "ok"})
		h.c.Enqueue(cache.Key{Namespace: "ns", Name: "later"})
		time.Sleep(time.Second) // virtual: every retry is done
		synctest.Wait()
		h.c.Enqueue(cache.Key{Namespace: "ns", Name: "terminal"})
		synctest.Wait()

		s := h.c.Status()
		if s.Name != "st" || s.Workers != 3 || s.Active != 0 {
			t.Errorf("Status = %+v; want st, 3 workers, none active", s)
		}
		// 12 bad keys fail twice each (MaxRetries 1), one terminal.
		if s.Succeeded != 1 || s.RequeuedAfter != 1 || s.Failed != 25 || s.Terminal != 1 {
			t.Errorf("succeeded %d, requeued %d, failed %d, terminal %d; want 1, 1, 25, 1", s.Succeeded, s.RequeuedAfter, s.Failed, s.Terminal)
		}
		if got := h.counter("controller_runtime_reconcile_total", "controller", "st", "result", "error"); uint64(got) != s.Failed {
			t.Errorf("Failed = %d, but the metric says %v", s.Failed, got)
		}
		if s.Duration.Count != 27 || len(s.Duration.Buckets) != len(s.Duration.UpperBounds) || len(s.Duration.Buckets) == 0 {
			t.Errorf("Duration = %+v; want 27 observations in buckets", s.Duration)
		}
		// 24 of them took 20 ms: the 25 ms bucket holds those and the 3 quick ones.
		for i, ub := range s.Duration.UpperBounds {
			if ub == 0.025 && s.Duration.Buckets[i] != 27 || ub == 0.01 && s.Duration.Buckets[i] != 3 {
				t.Errorf("bucket ≤%v holds %d", ub, s.Duration.Buckets[i])
			}
		}
		if len(s.RecentErrors) != controller.RecentErrors {
			t.Fatalf("%d recent errors, want %d", len(s.RecentErrors), controller.RecentErrors)
		}
		newest := s.RecentErrors[0]
		if newest.Key != "ns/terminal" || !newest.Terminal || !strings.Contains(newest.Error, "cannot ever work") {
			t.Errorf("newest error = %+v; want the terminal one on ns/terminal", newest)
		}
		for i := 1; i < len(s.RecentErrors); i++ {
			e := s.RecentErrors[i]
			if e.Terminal || !strings.HasPrefix(e.Key, "ns/bad-") || e.Error != strings.TrimPrefix(e.Key, "ns/")+" is broken" {
				t.Errorf("recent error %d = %+v", i, e)
			}
			if e.Time.After(s.RecentErrors[i-1].Time) {
				t.Errorf("recent errors out of order at %d: %v after %v", i, e.Time, s.RecentErrors[i-1].Time)
			}
		}
		if s.Queue.Name != "st" || s.Queue.Ready != 0 || s.Queue.Delayed != 1 || s.Queue.InFlight != 0 {
			t.Errorf("Queue = %+v; want st with only \"later\" delayed", s.Queue)
		}
	})
}
