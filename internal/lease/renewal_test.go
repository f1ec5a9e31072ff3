package lease

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// step is one event in the life of a Renewal: the fake clock moves by
// advance, then a write starts (and, after took, succeeds or fails), and
// the Renewal is asked at the clock's time.
type step struct {
	advance time.Duration
	write   string        // "", "ok" or "fail": a write started now, with that outcome
	took    time.Duration // how long the write took: the clock moves on by it

	// Then, at the clock's time:
	due   bool
	lost  bool
	bound time.Duration // how long a write starting now may take
	wake  time.Duration // when to look again, from now
}

func TestRenewal_DueBoundWakeAndLostFollowTheLastSuccess(t *testing.T) {
	timing := Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "new: a write is due at once, nothing to lose",
		steps: []step{
			{due: true, bound: 2 * time.Second, wake: 0},
			{advance: time.Hour, due: true, bound: 2 * time.Second, wake: 0},
		},
	}, {
		name: "a first write that fails is retried RetryPeriod after it started, and loses nothing",
		steps: []step{
			{write: "fail", took: 500 * time.Millisecond, due: false, bound: 2 * time.Second, wake: 1500 * time.Millisecond},
			{advance: 1500 * time.Millisecond, due: true, bound: 2 * time.Second, wake: 0},
			{advance: time.Hour, due: true, bound: 2 * time.Second, wake: 0},
		},
	}, {
		name: "renewals start RetryPeriod apart, however long each took",
		steps: []step{
			{write: "ok", took: 1500 * time.Millisecond, due: false, bound: 8500 * time.Millisecond, wake: 500 * time.Millisecond},
			{advance: 499 * time.Millisecond, due: false, bound: 8001 * time.Millisecond, wake: time.Millisecond},
			{advance: time.Millisecond, due: true, bound: 8 * time.Second, wake: 0},
			{write: "ok", took: 3 * time.Second, due: true, bound: 7 * time.Second, wake: 0},
		},
	}, {
		name: "failures keep the cadence and the deadline of the last success; lost at RenewDeadline after its start",
		steps: []step{
			{write: "ok", took: time.Second, due: false, bound: 9 * time.Second, wake: time.Second},                                            // renewed at 0
			{advance: time.Second, write: "fail", took: 100 * time.Millisecond, bound: 7900 * time.Millisecond, wake: 1900 * time.Millisecond}, // 2s
			{advance: 1900 * time.Millisecond, write: "fail", took: 6 * time.Second, lost: true, due: true, bound: 2 * time.Second, wake: 0},   // 4s: hangs until 10s
			{advance: time.Hour, lost: true, due: true, bound: 2 * time.Second, wake: 0},
		},
	}, {
		name: "the deadline wakes the owner when it comes before the next write",
		steps: []step{
			{write: "ok", due: false, bound: 10 * time.Second, wake: 2 * time.Second},                                                            // renewed at 0
			{advance: 9 * time.Second, write: "fail", took: 500 * time.Millisecond, bound: 500 * time.Millisecond, wake: 500 * time.Millisecond}, // 9s fails at 9.5s; due at 11s, lost at 10s
			{advance: 500 * time.Millisecond, lost: true, bound: 2 * time.Second, wake: time.Second},
		},
	}, {
		name: "a success after a loss renews again",
		steps: []step{
			{write: "ok", bound: 10 * time.Second, wake: 2 * time.Second},
			{advance: 10 * time.Second, lost: true, due: true, bound: 2 * time.Second, wake: 0},
			{write: "ok", took: 100 * time.Millisecond, bound: 9900 * time.Millisecond, wake: 1900 * time.Millisecond},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			r := NewRenewal(timing)
			for i, s := range tt.steps {
				clk.Step(s.advance)
				if s.write != "" {
					start := clk.Now()
					clk.Step(s.took)
					if s.write == "ok" {
						r.Renewed(start)
					} else {
						r.Failed(start)
					}
				}
				now := clk.Now()
				if got := r.Due(now); got != s.due {
					t.Errorf("step %d: Due = %v, want %v", i, got, s.due)
				}
				if got := r.Lost(now); got != s.lost {
					t.Errorf("step %d: Lost = %v, want %v", i, got, s.lost)
				}
				if got := r.Bound(now); got != s.bound {
					t.Errorf("step %d: Bound = %v, want %v", i, got, s.bound)
				}
				if got := r.Wake(now).Sub(now); got != s.wake {
					t.Errorf("step %d: Wake = now%+v, want now%+v", i, got, s.wake)
				}
			}
		})
	}
}

func TestRenewal_LastIsTheStartOfTheLastSuccessfulWrite(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	r := NewRenewal(Timing{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second})
	if !r.Last().IsZero() {
		t.Fatalf("Last = %v before any write, want zero", r.Last())
	}
	first := clk.Now()
	r.Renewed(first)
	clk.Step(time.Second)
	r.Failed(clk.Now())
	if r.Last() != first {
		t.Fatalf("Last = %v after a failure, want the last success's start %v", r.Last(), first)
	}
}
