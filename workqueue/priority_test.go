package workqueue

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// With the default aging of 100 ms per priority step, a key at -100 is
// overtaken by fresh priority-0 keys for exactly 10 s, and not after.
func TestQueue_AgingLetsOldLowPriorityKeyOvertakeNewerHigherPriorityKeys(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	q := New(Options[string]{Clock: clk})
	q.AddWithPriority("low", -100)
	for s := 1; s <= 10; s++ {
		clk.Step(time.Second)
		fresh := fmt.Sprintf("fresh-%d", s)
		q.Add(fresh)
		k := mustGet(t, q)
		q.Done(k)
		want := fresh
		if s == 10 {
			want = "low" // 0s + 100 × 100ms = 10s: a tie, and low came first
		}
		if k != want {
			t.Fatalf("at %ds Get = %q, want %q", s, k, want)
		}
	}
}

func TestQueue_ExtremePrioritiesDoNotOverflow(t *testing.T) {
	q := New(Options[string]{})
	q.AddWithPriority("min", math.MinInt)
	q.AddWithPriority("max", math.MaxInt)
	q.Add("zero")
	q.AddWithPriority("max-1", math.MaxInt-1)
	for _, w := range []string{"max", "max-1", "zero", "min"} {
		if k := mustGet(t, q); k != w {
			t.Fatalf("Get = %q, want %q", k, w)
		}
	}
}

// TestQueue_LowPriorityKeyIsHandedOutWithinAgingBoundUnderSaturation keeps 8
// workers saturated with priority-0 keys (1 ms of work each, four producers
// adding twice what the workers can take, from 1,000 keys) and adds one key
// at priority -100. The documented bound: after (0 − (−100)) × Aging no key
// can overtake it any more, and it is handed out once the keys already ahead
// are: at most 1,000 keys / 8 workers × 1 ms, plus the 1 ms the workers may
// be into their current keys. A queue ordered by priority alone, like
// controller-runtime's (controller-runtime#3496), would never hand it out
// here, since priority-0 keys are always ready.
func TestQueue_LowPriorityKeyIsHandedOutWithinAgingBoundUnderSaturation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			aging   = 10 * time.Millisecond
			work    = time.Millisecond
			workers = 8
			keys    = 1000
		)
		q := New(Options[string]{Aging: aging})
		ctx, stop := context.WithCancel(context.Background())
		defer stop()

		var lowAt atomic.Int64 // unix nanos when "low" was handed out
		var handedOut atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					k, err := q.Get(ctx)
					if err != nil {
						return
					}
					if k == "low" {
						lowAt.Store(time.Now().UnixNano())
					}
					handedOut.Add(1)
					time.Sleep(work)
					q.Done(k)
				}
			})
		}
		for p := range 4 {
			wg.Go(func() {
				tick := time.NewTicker(250 * time.Microsecond) // 4 × 4000/s = 2 × capacity
				defer tick.Stop()
				for i := p; ; i += 4 {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
						q.Add(fmt.Sprintf("k%d", i%keys))
					}
				}
			})
		}

		time.Sleep(500 * time.Millisecond) // saturate first
		if n := q.Status().Ready; n < keys/2 {
			t.Fatalf("only %d keys ready after warm-up: the workers are not saturated", n)
		}
		added := time.Now()
		q.AddWithPriority("low", -100)
		bound := 100*aging + (keys/workers+1)*work
		time.Sleep(2 * bound)
		stop()
		wg.Wait()

		if lowAt.Load() == 0 {
			t.Fatalf("low was not handed out within %v (2 × the bound) under saturation: starved", 2*bound)
		}
		waited := time.Unix(0, lowAt.Load()).Sub(added)
		if waited > bound {
			t.Fatalf("low waited %v; the documented bound is %v", waited, bound)
		}
		// It did yield to priority 0 for most of its aging window: the
		// priority still meant something.
		if waited < 90*aging {
			t.Fatalf("low waited only %v; with priority -100 it should yield for about %v", waited, 100*aging)
		}
		t.Logf("low waited %v (bound %v); %d keys handed out", waited, bound, handedOut.Load())
	})
}
