package manager_test

import (
	"context"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/kloop-dev/kloop/manager"
)

type named struct {
	manager.RunnableFunc
	leader bool
}

func (n named) NeedLeaderElection() bool { return n.leader }

func TestManagerStatus_FollowsStartSyncAndStop(t *testing.T) {
	synctest.Test(t, testManagerStatus)
}

func testManagerStatus(t *testing.T) {
	m, err := manager.New(manager.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	c := gatedCache{gate: gate}
	wait := func(ctx context.Context) error { <-ctx.Done(); return nil }
	every, leader := named{wait, false}, named{wait, true}
	for _, r := range []manager.Runnable{leader, c, every} {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	rs := m.Status().Runnables
	if len(rs) != 3 || rs[0] != manager.Runnable(c) || rs[1].(named).leader || !rs[2].(named).leader {
		t.Fatalf("Status().Runnables = %v; want the cache, then the one for every replica, then the leader's", rs)
	}
	if e := m.Status().Election; e != nil {
		t.Fatalf("Status().Election = %+v without leader election, want nil", e)
	}
	s := m.Status()
	s.Runnables = nil // checked above
	if !reflect.DeepEqual(s, manager.Status{}) {
		t.Fatalf("before Start: %+v", s)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	synctest.Wait()
	if s := m.Status(); !s.Started || !s.Leading || s.Synced || s.LeaderElection || s.Stopping {
		t.Fatalf("started, cache not synced: %+v", s)
	}
	close(gate)
	synctest.Wait()
	if s := m.Status(); !s.Synced {
		t.Fatalf("cache synced: %+v", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := m.Status(); !s.Stopping {
		t.Fatalf("after stop: %+v", s)
	}
}
