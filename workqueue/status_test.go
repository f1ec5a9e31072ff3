package workqueue

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop/internal/metricstest"
)

func TestQueueStatus_CountsReadyByPriorityDelayedAndInFlightWithAges(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	q := New(Options[string]{Name: "q", Clock: clk, Registerer: reg})
	defer q.ShutDown()

	if s := q.Status(); s.Name != "q" || s.Ready != 0 || s.ReadyByPriority != nil || s.OldestReady != 0 {
		t.Fatalf("empty queue: %+v", s)
	}
	q.Add("a")
	clk.Step(3 * time.Second)
	q.Add("b")
	q.AddWithPriority("c", 100)
	q.AddAfter("later", time.Minute)
	clk.Step(2 * time.Second)
	k, err := q.Get(context.Background()) // c, the highest priority
	if err != nil || k != "c" {
		t.Fatalf("Get = %q, %v; want c", k, err)
	}
	clk.Step(time.Second)

	s := q.Status()
	want := map[int]int{0: 2}
	if s.Ready != 2 || !maps.Equal(s.ReadyByPriority, want) || s.Delayed != 1 || s.InFlight != 1 {
		t.Errorf("Status = %+v; want 2 ready at priority 0, 1 delayed, 1 in flight", s)
	}
	if s.OldestReady != 6*time.Second || s.LongestRunning != time.Second {
		t.Errorf("OldestReady = %v, LongestRunning = %v; want 6s (a) and 1s (c)", s.OldestReady, s.LongestRunning)
	}
	if adds := metricstest.Value(t, reg, "workqueue_adds_total", "name", "q"); s.Adds != uint64(adds) || s.Adds != 3 {
		t.Errorf("Adds = %d, workqueue_adds_total = %v; want both 3", s.Adds, adds)
	}
	if s.Retries != 1 {
		t.Errorf("Retries = %d, want 1 (the AddAfter)", s.Retries)
	}

	// Once its delay has passed, "later" counts as ready.
	q.AddWithPriority("d", -1)
	clk.Step(time.Minute)
	s = q.Status()
	want = map[int]int{0: 3, -1: 1}
	if s.Ready != 4 || !maps.Equal(s.ReadyByPriority, want) || s.Delayed != 0 {
		t.Errorf("after the delay: %+v; want ready %v, nothing delayed", s, want)
	}
	q.Done("c")
	q.ShutDown()
	if s := q.Status(); !s.ShuttingDown || s.InFlight != 0 {
		t.Errorf("after Done and ShutDown: %+v", s)
	}
}

func TestQueueStatus_UnnamedQueueHasNoCountersAndNoClock(t *testing.T) {
	q := New(Options[int]{})
	q.Add(1)
	q.Add(2)
	s := q.Status()
	if s.Name != "" || s.Ready != 2 || s.ReadyByPriority[0] != 2 || s.Adds != 0 || s.OldestReady != 0 {
		t.Fatalf("Status = %+v; want 2 ready, no name, no counters, no age", s)
	}
}
