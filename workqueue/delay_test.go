package workqueue

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// getAsync starts a Get in a goroutine and returns where its key (or error
// text) arrives, with when it arrived.
type arrival struct {
	key string
	err error
	at  time.Time
}

func getAsync(q *Queue[string]) <-chan arrival {
	ch := make(chan arrival, 1)
	go func() {
		k, err := q.Get(context.Background())
		ch <- arrival{k, err, time.Now()}
	}()
	return ch
}

func TestQueue_AddAfterHandsOutKeyOnlyOnceItsDelayHasPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		start := time.Now()
		q.AddAfter("a", 3*time.Second)
		if n := q.Status().Ready; n != 0 {
			t.Fatalf("Status().Ready = %d right after AddAfter; want 0", n)
		}
		got := <-getAsync(q)
		if got.key != "a" || got.err != nil {
			t.Fatalf("Get = %q, %v; want a", got.key, got.err)
		}
		if waited := got.at.Sub(start); waited != 3*time.Second {
			t.Fatalf("a was handed out after %v; want exactly 3s", waited)
		}
		q.Done("a")
		q.ShutDown()
	})
}

func TestQueue_SoonerAddAfterMovesDelayedKeyEarlier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		start := time.Now()
		got := getAsync(q) // blocked Get holds the timer for a's first delay
		q.AddAfter("a", time.Hour)
		synctest.Wait()
		q.AddAfter("a", time.Minute)
		a := <-got
		if a.key != "a" {
			t.Fatalf("Get = %q, %v; want a", a.key, a.err)
		}
		if waited := a.at.Sub(start); waited != time.Minute {
			t.Fatalf("a was handed out after %v; want 1m (the sooner AddAfter)", waited)
		}
		q.Done("a")
		q.ShutDown()
	})
}

func TestQueue_LaterAddAfterDoesNotPostponeDelayedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		start := time.Now()
		q.AddAfter("a", time.Minute)
		q.AddAfter("a", time.Hour)
		a := <-getAsync(q)
		if waited := a.at.Sub(start); a.key != "a" || waited != time.Minute {
			t.Fatalf("Get = %q after %v; want a after 1m", a.key, waited)
		}
		q.Done("a")
		q.ShutDown()
	})
}

func TestQueue_AddMakesDelayedKeyReadyAtOnce(t *testing.T) {
	q := New(Options[string]{})
	q.AddAfter("a", time.Hour)
	q.Add("a")
	if n := q.Status().Ready; n != 1 {
		t.Fatalf("Status().Ready = %d after Add of a delayed key; want 1", n)
	}
	if k := mustGet(t, q); k != "a" {
		t.Fatalf("Get = %q, want a", k)
	}
	q.Done("a")
	if n := q.Status().Ready; n != 0 {
		t.Fatalf("Status().Ready = %d; want 0: the hour-long delay must be gone", n)
	}
}

func TestQueue_AddAfterOfReadyKeyChangesNothing(t *testing.T) {
	q := New(Options[string]{})
	q.Add("a")
	q.AddAfter("a", time.Hour)
	if k := mustGet(t, q); k != "a" {
		t.Fatalf("Get = %q, want a", k)
	}
	q.Done("a")
	if n := q.delays.len(); n != 0 {
		t.Fatalf("%d keys delayed after AddAfter of a ready key; want 0", n)
	}
}

func TestQueue_DelayOfInFlightKeyRequeuesItAfterDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("a")
		k := mustGet(t, q)
		q.AddAfter(k, time.Second) // a reconciler's RequeueAfter
		time.Sleep(2 * time.Second)
		if n := q.Status().Ready; n != 0 {
			t.Fatalf("Status().Ready = %d while a is still in flight; want 0", n)
		}
		q.Done(k)
		if k := mustGet(t, q); k != "a" {
			t.Fatalf("Get = %q, want a", k)
		}
		q.Done("a")

		// Done before the delay passes: a comes back when it passes.
		q.Add("b")
		k = mustGet(t, q)
		start := time.Now()
		q.AddAfter(k, time.Second)
		q.Done(k)
		b := <-getAsync(q)
		if waited := b.at.Sub(start); b.key != "b" || waited != time.Second {
			t.Fatalf("Get = %q after %v; want b after 1s", b.key, waited)
		}
		q.Done("b")
		q.ShutDown()
	})
}

func TestQueue_DelayedKeysComeOutInTimeOrderAmongManyWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[int]{})
		start := time.Now()
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					k, err := q.Get(context.Background())
					if err != nil {
						return
					}
					mu.Lock()
					order = append(order, k)
					if time.Since(start) != time.Duration(k)*time.Second {
						t.Errorf("key %d handed out after %v; want %ds", k, time.Since(start), k)
					}
					mu.Unlock()
					q.Done(k)
				}
			})
		}
		for _, k := range []int{5, 1, 4, 2, 3} {
			q.AddAfter(k, time.Duration(k)*time.Second)
		}
		time.Sleep(6 * time.Second)
		q.ShutDown()
		wg.Wait()
		if len(order) != 5 {
			t.Fatalf("handed out %v; want all five delayed keys", order)
		}
		for i, k := range order {
			if k != i+1 {
				t.Fatalf("handed out %v; want 1..5 in time order", order)
			}
		}
	})
}

func TestQueue_ThousandsOfDelaysStartNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[int]{})
		before := runtime.NumGoroutine()
		for i := range 5000 {
			q.AddAfter(i, time.Duration(1+i%100)*time.Millisecond)
		}
		// NumGoroutine counts the whole process; goroutines of earlier
		// tests may still be ending, so only an increase is a failure.
		if n := runtime.NumGoroutine(); n > before {
			t.Fatalf("goroutines went from %d to %d after 5000 AddAfter; want no new ones", before, n)
		}
		if n := q.delays.len(); n != 5000 {
			t.Fatalf("%d keys in the delay heap; want 5000", n)
		}
		time.Sleep(time.Second)
		if n := q.Status().Ready; n != 5000 {
			t.Fatalf("Status().Ready = %d after every delay passed; want 5000", n)
		}
		q.ShutDown()
	})
}

func TestQueue_ShutDownDropsDelayedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.AddAfter("later", time.Second)
		q.Add("now")
		q.ShutDown()
		q.AddAfter("ignored", time.Millisecond)
		if k := mustGet(t, q); k != "now" {
			t.Fatalf("Get = %q, want now", k)
		}
		q.Done("now")
		time.Sleep(2 * time.Second)
		mustShutDownErr(t, q)
	})
}

// The queue also works on k8s.io/utils' fake clock: only a stepped clock
// releases a delayed key, and a blocked Get waits on the fake timer. The
// bubble is there only so that synctest.Wait can tell when the Get is
// blocked; its virtual time is never advanced, since nothing sleeps.
func TestQueue_DelaysFollowAnInjectedFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		q := New(Options[string]{Clock: clk})
		q.AddAfter("a", 10*time.Second)
		got := make(chan arrival, 1)
		go func() {
			k, err := q.Get(context.Background())
			got <- arrival{key: k, err: err}
		}()
		synctest.Wait()
		if !clk.HasWaiters() {
			t.Fatal("the blocked Get armed no timer on the fake clock")
		}
		clk.Step(9 * time.Second)
		synctest.Wait()
		select {
		case a := <-got:
			t.Fatalf("Get returned %q, %v after 9 of 10 fake seconds", a.key, a.err)
		default:
		}
		clk.Step(time.Second)
		synctest.Wait()
		select {
		case a := <-got:
			if a.key != "a" || a.err != nil {
				t.Fatalf("Get = %q, %v; want a", a.key, a.err)
			}
		default:
			t.Fatal("Get still blocked after the fake clock passed a's delay: the timer was lost")
		}
		q.Done("a")
		q.ShutDown()
	})
}

func TestQueue_CancelledTimeKeeperHandsTheTimerToAnotherGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() { // becomes the time keeper
			_, err := q.Get(ctx)
			first <- err
		}()
		synctest.Wait()
		q.AddAfter("a", time.Minute)
		synctest.Wait()
		second := getAsync(q)
		synctest.Wait()
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Get = %v, want context.Canceled", err)
		}
		a := <-second
		if waited := a.at.Sub(start); a.key != "a" || waited != time.Minute {
			t.Fatalf("second Get = %q, %v after %v; want a after 1m", a.key, a.err, waited)
		}
		q.Done("a")
		q.ShutDown()
	})
}
