package watcher_test

import (
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kloop-dev/kloop/watcher"
)

func TestReflectorStatus_FollowsListWatchWaitAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{InitialList: watcher.InitialListPaginated})
		expect := func(what string, want watcher.Phase) watcher.Status {
			t.Helper()
			synctest.Wait()
			s := x.r.Status()
			if s.Phase != want {
				t.Fatalf("%s: Phase = %v, want %v", what, s.Phase, want)
			}
			return s
		}
		x.expectCall(`List rv="0" limit=500`)
		expect("listing", watcher.PhaseListing)

		x.lw.PushList(watcher.ListPage[cm]{}, errInternal)
		s := expect("after a failed list", watcher.PhaseWaiting)
		if !apierrors.IsInternalError(s.LastError) || s.Errors != 1 || s.Lists != 1 {
			t.Fatalf("after a failed list: %+v, want the internal error, 1 error, 1 list", s)
		}
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3")}, ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		w := x.lw.PushWatch()
		s = expect("watching", watcher.PhaseWatching)
		if s.LastError != nil || s.Snapshots != 1 || s.Lists != 2 || s.Watches != 1 || s.ResourceVersion != "10" {
			t.Fatalf("watching: %+v, want no error, 1 snapshot, 2 lists, 1 watch at rv 10", s)
		}
		listedAt := s.LastEvent
		if listedAt.IsZero() {
			t.Fatalf("LastEvent is zero after a snapshot")
		}
		time.Sleep(time.Minute) // virtual time
		w.Modify(obj("a", "11"))
		s = expect("after an event", watcher.PhaseWatching)
		if got := s.LastEvent.Sub(listedAt); got != time.Minute {
			t.Fatalf("LastEvent moved by %v, want 1m", got)
		}
		x.stop()
		expect("stopped", watcher.PhaseStopped)
	})
}

func TestPhase_String(t *testing.T) {
	for p, want := range map[watcher.Phase]string{
		watcher.PhaseStopped: "stopped", watcher.PhaseListing: "listing", watcher.PhaseConnecting: "connecting",
		watcher.PhaseWatching: "watching", watcher.PhaseWaiting: "waiting", watcher.Phase(9): "Phase(9)",
	} {
		if got := p.String(); got != want {
			t.Errorf("Phase(%d).String() = %q, want %q", p, got, want)
		}
	}
}
