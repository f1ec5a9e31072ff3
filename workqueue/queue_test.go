package workqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// deadline bounds every call that could block forever if the queue were
// broken, so a bug fails the test with a message instead of hanging it.
const deadline = 10 * time.Second

// mustGet takes a key that the test knows is ready.
func mustGet[K comparable](t *testing.T, q *Queue[K]) K {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	k, err := q.Get(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get blocked for %v although a key should be ready: queue deadlocked or lost the key", deadline)
	}
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return k
}

// mustShutDownErr expects Get to report shutdown at once.
func mustShutDownErr[K comparable](t *testing.T, q *Queue[K]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	k, err := q.Get(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get blocked for %v on a shut-down, empty queue: it should return ErrShutDown", deadline)
	}
	if !errors.Is(err, ErrShutDown) {
		t.Fatalf("Get = %v, %v; want ErrShutDown", k, err)
	}
}

func TestQueue_DeduplicatesKeysWaitingToBeHandedOut(t *testing.T) {
	q := New(Options[string]{})
	q.Add("a")
	q.Add("b")
	q.Add("a")
	q.Add("a")
	if got := q.Status().Ready; got != 2 {
		t.Fatalf("Status().Ready = %d after adding a, b, a, a; want 2", got)
	}
	if k := mustGet(t, q); k != "a" {
		t.Fatalf("first Get = %q, want a", k)
	}
	if k := mustGet(t, q); k != "b" {
		t.Fatalf("second Get = %q, want b", k)
	}
	if got := q.Status().Ready; got != 0 {
		t.Fatalf("Status().Ready = %d after handing out both keys; want 0 (a was queued twice?)", got)
	}
}

func TestQueue_KeyAddedWhileInFlightIsHandedOutAgainOnlyAfterDone(t *testing.T) {
	q := New(Options[string]{})
	q.Add("a")
	k := mustGet(t, q)
	q.Add("a")
	q.Add("a")
	if got := q.Status().Ready; got != 0 {
		t.Fatalf("Status().Ready = %d while a is in flight; want 0: a must wait for its Done", got)
	}
	q.Done(k)
	if got := q.Status().Ready; got != 1 {
		t.Fatalf("Status().Ready = %d after Done; want 1: a was added while in flight", got)
	}
	if k := mustGet(t, q); k != "a" {
		t.Fatalf("Get = %q, want a", k)
	}
	q.Done("a")
	if got := q.Status().Ready; got != 0 {
		t.Fatalf("Status().Ready = %d after the second Done; want 0", got)
	}
}

func TestQueue_HandsOutEqualPrioritiesInFIFOOrder(t *testing.T) {
	q := New(Options[int]{})
	for i := range 100 {
		q.AddWithPriority(i, 3)
	}
	for i := range 100 {
		if k := mustGet(t, q); k != i {
			t.Fatalf("Get #%d = %d; want %d (FIFO among equal priorities)", i, k, i)
		}
	}
}

func TestQueue_HandsOutHigherPrioritiesFirst(t *testing.T) {
	q := New(Options[string]{})
	q.AddWithPriority("low", -100)
	q.Add("normal")
	q.AddWithPriority("high", 10)
	q.Add("normal2")
	want := []string{"high", "normal", "normal2", "low"}
	for _, w := range want {
		if k := mustGet(t, q); k != w {
			t.Fatalf("Get = %q, want %q (order %v)", k, w, want)
		}
	}
}

func TestQueue_ReAddWithHigherPriorityMovesReadyKeyAhead(t *testing.T) {
	q := New(Options[string]{})
	q.Add("a")
	q.Add("b")
	q.Add("c")
	q.AddWithPriority("c", 5)  // raise
	q.AddWithPriority("a", -5) // lower priority: ignored, a keeps 0
	want := []string{"c", "a", "b"}
	for _, w := range want {
		if k := mustGet(t, q); k != w {
			t.Fatalf("Get = %q, want %q (order %v)", k, w, want)
		}
	}
}

func TestQueue_GetReturnsContextErrorAndLosesNoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := q.Get(ctx)
			errc <- err
		}()
		synctest.Wait() // Get is blocked
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Get after cancel = %v, want context.Canceled", err)
		}
		q.Add("a")
		if k := mustGet(t, q); k != "a" {
			t.Fatalf("Get = %q, want a: the cancelled Get must not have taken it", k)
		}
		if _, err := q.Get(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Get with a done context = %v, want context.Canceled", err)
		}
	})
}

func TestQueue_BlockedGetReceivesKeyAddedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		got := make(chan string, 1)
		go func() { got <- mustGet(t, q) }()
		synctest.Wait()
		q.Add("a")
		if k := <-got; k != "a" {
			t.Fatalf("blocked Get = %q, want a", k)
		}
		q.Done("a")
		q.ShutDown()
	})
}

func TestQueue_AfterShutDownHandsOutReadyKeysThenReportsShutDown(t *testing.T) {
	q := New(Options[string]{})
	q.Add("a")
	q.Add("b")
	q.ShutDown()
	q.Add("c") // ignored
	if !q.Status().ShuttingDown {
		t.Fatal("Status().ShuttingDown = false after ShutDown")
	}
	for _, w := range []string{"a", "b"} {
		if k := mustGet(t, q); k != w {
			t.Fatalf("Get after ShutDown = %q, want %q", k, w)
		}
		q.Done(w)
	}
	mustShutDownErr(t, q)
}

func TestQueue_ShutDownWakesEveryBlockedGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		var wg sync.WaitGroup
		var shut atomic.Int32
		for range 5 {
			wg.Go(func() {
				if _, err := q.Get(context.Background()); errors.Is(err, ErrShutDown) {
					shut.Add(1)
				}
			})
		}
		synctest.Wait()
		q.ShutDown()
		wg.Wait()
		if n := shut.Load(); n != 5 {
			t.Fatalf("%d of 5 blocked Gets returned ErrShutDown", n)
		}
	})
}

func TestQueue_ShutDownStillHandsOutKeyAddedWhileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("a")
		k := mustGet(t, q)
		q.Add("a") // dirty: must be handed out again after Done
		q.ShutDown()

		// Another worker with nothing to do must wait for a, not quit.
		got := make(chan string, 1)
		go func() {
			k, err := q.Get(context.Background())
			if err != nil {
				got <- err.Error()
				return
			}
			got <- k
		}()
		synctest.Wait()
		select {
		case k := <-got:
			t.Fatalf("Get returned %q before the in-flight a was Done; want it to wait for a", k)
		default:
		}
		q.Done(k)
		if k := <-got; k != "a" {
			t.Fatalf("Get = %q, want a again", k)
		}
		q.Done("a")
		mustShutDownErr(t, q)
	})
}

func TestQueue_ShutDownWithDrainWaitsForInFlightAndReadyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("a")
		q.Add("b")
		k := mustGet(t, q)

		drained := make(chan error, 1)
		go func() { drained <- q.ShutDownWithDrain(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("ShutDownWithDrain returned %v with a in flight and b ready", err)
		default:
		}
		q.Done(k)
		k = mustGet(t, q) // b
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("ShutDownWithDrain returned %v with b in flight", err)
		default:
		}
		q.Done(k)
		if err := <-drained; err != nil {
			t.Fatalf("ShutDownWithDrain = %v, want nil", err)
		}
		if err := q.ShutDownWithDrain(context.Background()); err != nil {
			t.Fatalf("second ShutDownWithDrain = %v, want nil at once", err)
		}
	})
}

func TestQueue_ShutDownReleasesABlockedShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("stuck")
		mustGet(t, q) // never Done
		drained := make(chan error, 2)
		for range 2 {
			go func() { drained <- q.ShutDownWithDrain(context.Background()) }()
		}
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("ShutDownWithDrain returned %v with a key in flight", err)
		default:
		}
		// The second signal: stop waiting.
		q.ShutDown()
		for range 2 {
			if err := <-drained; !errors.Is(err, ErrDrainStopped) {
				t.Fatalf("ShutDownWithDrain after ShutDown = %v, want ErrDrainStopped", err)
			}
		}
		// A drain asked for after that waits again, until the key is Done.
		again := make(chan error, 1)
		go func() { again <- q.ShutDownWithDrain(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-again:
			t.Fatalf("a new ShutDownWithDrain returned %v with the key still in flight", err)
		default:
		}
		q.Done("stuck")
		if err := <-again; err != nil {
			t.Fatalf("ShutDownWithDrain once drained = %v, want nil", err)
		}
	})
}

func TestQueue_ShutDownWithDrainGivesUpWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("stuck")
		mustGet(t, q) // never Done
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err := q.ShutDownWithDrain(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ShutDownWithDrain = %v, want DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("ShutDownWithDrain waited %v, want exactly its context's minute", waited)
		}
	})
}

func TestQueue_DoneForKeyNotInFlightIsIgnored(t *testing.T) {
	q := New(Options[string]{})
	q.Done("never-added")
	q.Add("a")
	q.Done("a") // ready, not in flight
	if got := q.Status().Ready; got != 1 {
		t.Fatalf("Status().Ready = %d after Done of a ready key; want 1 (Done must not drop it)", got)
	}
	k := mustGet(t, q)
	q.Done(k)
	q.Done(k)
	q.Add("a")
	if k := mustGet(t, q); k != "a" {
		t.Fatalf("Get = %q, want a", k)
	}
}

// TestQueue_NeverHandsOutAKeyTwiceBeforeDone hammers a queue from many
// goroutines and checks, per key, that no two workers hold it at once and
// that every add is followed by a hand-out (nothing is lost). It runs in a
// synctest bubble so that the delays of AddAfter pass in fake time.
func TestQueue_NeverHandsOutAKeyTwiceBeforeDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			keys      = 50
			producers = 4
			workers   = 8
			adds      = 5000
		)
		q := New(Options[int]{})
		var holders [keys]atomic.Int32
		// added[k] counts adds of k, bumped just before each add; seen[k] is
		// what a worker read from added[k] after being handed k. A hand-out
		// that follows an add therefore sees that add counted.
		var added, seen [keys]atomic.Int64
		var violations atomic.Int64

		var wwg sync.WaitGroup
		for w := range workers {
			wwg.Go(func() {
				for {
					k, err := q.Get(context.Background())
					if err != nil {
						return
					}
					if holders[k].Add(1) != 1 {
						violations.Add(1)
					}
					seen[k].Store(added[k].Load())
					if w%2 == 0 { // workers add too, as reconcilers requeue
						next := (k + 1) % keys
						added[next].Add(1)
						q.AddWithPriority(next, k%7-3)
					}
					holders[k].Add(-1)
					q.Done(k)
				}
			})
		}
		var pwg sync.WaitGroup
		for p := range producers {
			pwg.Go(func() {
				for i := range adds {
					k := (i*7 + p) % keys
					added[k].Add(1)
					switch i % 3 {
					case 0:
						q.Add(k)
					case 1:
						q.AddWithPriority(k, i%5-2)
					default:
						q.AddAfter(k, time.Duration(1+i%4)*time.Millisecond)
					}
				}
			})
		}
		pwg.Wait()
		time.Sleep(10 * time.Millisecond) // fake time: every delay passes
		synctest.Wait()                   // workers have drained the queue
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if err := q.ShutDownWithDrain(ctx); err != nil {
			t.Fatalf("ShutDownWithDrain: %v: workers stuck or keys left behind", err)
		}
		wwg.Wait()
		if v := violations.Load(); v != 0 {
			t.Fatalf("%d times a key was handed out while another worker held it", v)
		}
		for k := range keys {
			if a, s := added[k].Load(), seen[k].Load(); s != a {
				t.Errorf("key %d: last hand-out saw %d adds of %d: an add was lost", k, s, a)
			}
		}
	})
}

func TestQueue_SteadyStateAddGetDoneDoesNotAllocate(t *testing.T) {
	q := New(Options[string]{})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/key-%d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var getErr error
	take := func() {
		k, err := q.Get(ctx)
		if err != nil && getErr == nil {
			getErr = err
		}
		q.Done(k)
	}
	cycle := func() {
		for _, k := range keys {
			q.Add(k)
			q.Add(k)
		}
		for range keys {
			take()
		}
		for i, k := range keys {
			q.AddWithPriority(k, i%3)
		}
		for range keys {
			take()
		}
	}
	// A busy queue: one key stays in flight throughout, so the queue never
	// goes quiet (a quiet queue lets go of its entries; see
	// TestQueue_QuietQueueReleasesItsEntries).
	q.Add("held")
	held := mustGet(t, q)
	defer q.Done(held)
	cycle() // first sight of the keys allocates their entries
	allocs := testing.AllocsPerRun(20, cycle)
	if getErr != nil {
		t.Fatalf("Get failed during the cycles (%v): a key was lost or the queue deadlocked", getErr)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per cycle of 4000 adds and 2000 Get/Done; want 0", allocs)
	}
}

func TestQueue_EvictsEntriesOfKeysThatStoppedComing(t *testing.T) {
	q := New(Options[int]{})
	// One key stays in flight, so the queue never goes quiet (which would
	// drop every entry at once) and only idle-window eviction applies.
	q.Add(1 << 30)
	held := mustGet(t, q)
	defer q.Done(held)
	// A burst of distinct keys, then a steady stream of a few keys.
	for k := range 5000 {
		q.Add(k)
		q.Done(mustGet(t, q))
	}
	if n := len(q.entries); n != 5001 {
		t.Fatalf("entries = %d right after the burst; want 5001 kept for reuse", n)
	}
	for i := range 3 * minIdleWindow {
		q.Add(-1 - i%10)
		q.Done(mustGet(t, q))
	}
	if n := len(q.entries); n > 11 {
		t.Fatalf("entries = %d after %d hand-outs of 10 keys; want the burst's entries evicted", n, 3*minIdleWindow)
	}
	// Evicted entries are recycled, and a key that was evicted works again.
	q.Add(42)
	if k := mustGet(t, q); k != 42 {
		t.Fatalf("Get = %d, want 42", k)
	}
	q.Done(42)
}

// The lock-free snapshot may still map an evicted key to its old entry after
// that entry was recycled for another key; Add must not take the other key's
// state for its own.
func TestQueue_AddIgnoresSnapshotEntryRecycledForAnotherKey(t *testing.T) {
	q := New(Options[string]{})
	cycle := func(k string) {
		q.Add(k)
		q.Done(mustGet(t, q))
	}
	cycle("old")
	for i := range 20 {
		cycle(fmt.Sprint("k", i))
	}
	q.mu.Lock()
	q.publish() // the snapshot now knows "old"
	q.mu.Unlock()
	for i := range minIdleWindow + 100 {
		cycle(fmt.Sprint("k", i%20))
	}
	if _, ok := q.entries["old"]; ok {
		t.Fatal(`"old" was not evicted; the test needs it evicted`)
	}
	if q.cached("old").e == nil {
		t.Fatal(`the snapshot no longer maps "old"; the test needs a stale snapshot`)
	}
	q.Add("new") // recycles old's entry
	q.Add("old")
	if n := q.Status().Ready; n != 2 {
		t.Fatalf("Status().Ready = %d after adding new and old; want 2 (old was merged into new's recycled entry?)", n)
	}
	got := map[string]bool{mustGet(t, q): true, mustGet(t, q): true}
	if !got["new"] || !got["old"] {
		t.Fatalf("handed out %v; want new and old", got)
	}
}

// Blocked Gets are woken one after another (each woken Get wakes the next
// while keys are ready), which must still put every idle worker to work on
// a burst: eight 1-second keys on eight workers finish after 1 s, not 8 s.
func TestQueue_BurstOfKeysKeepsEveryBlockedWorkerBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[int]{})
		start := time.Now()
		var wg sync.WaitGroup
		var finished atomic.Int64 // unix nanos of the last Done
		for range 8 {
			wg.Go(func() {
				for {
					k, err := q.Get(context.Background())
					if err != nil {
						return
					}
					time.Sleep(time.Second)
					finished.Store(time.Now().UnixNano())
					q.Done(k)
				}
			})
		}
		synctest.Wait() // all eight blocked
		for k := range 8 {
			q.Add(k)
		}
		synctest.Wait()
		time.Sleep(10 * time.Second)
		q.ShutDown()
		wg.Wait()
		if took := time.Unix(0, finished.Load()).Sub(start); took != time.Second {
			t.Fatalf("eight 1s keys on eight workers took %v; want 1s (workers left idle)", took)
		}
	})
}

// A queue that goes quiet (nothing ready, delayed or in flight) holds no
// entry, snapshot or slab for the keys it has seen, whether the last Done
// took the lock (a named queue) or not (then the next Get that blocks lets
// go); and the keys work again afterwards.
func TestQueue_QuietQueueReleasesItsEntries(t *testing.T) {
	check := func(t *testing.T, q *Queue[int]) {
		t.Helper()
		q.mu.Lock()
		n, snap, slab := len(q.entries), q.snap.Load(), len(q.slab)
		q.mu.Unlock()
		if n != 0 || snap != nil || slab != 0 {
			t.Fatalf("quiet queue holds %d entries, snapshot %v, %d slab entries; want none", n, snap != nil, slab)
		}
	}
	held := func(q *Queue[int]) int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.entries)
	}
	// burst adds the keys from..from+4999, each once more while in flight.
	burst := func(t *testing.T, q *Queue[int], from int) {
		t.Helper()
		for k := range 5000 {
			q.Add(from + k)
		}
		q.mu.Lock()
		q.publish() // the lock-free paths know every key
		q.mu.Unlock()
		ks := make([]int, 0, 5000)
		for range 5000 {
			ks = append(ks, mustGet(t, q))
		}
		for _, k := range ks {
			q.Add(k) // in flight: handed out again after its Done
		}
		for _, k := range ks {
			q.Done(k)
		}
		for range 5000 {
			q.Done(mustGet(t, q))
		}
	}
	t.Run("named", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := New(Options[int]{Name: "quiet", Registerer: prometheus.NewRegistry()})
			for k := range 5000 {
				q.Add(k)
			}
			for range 5000 {
				q.Done(mustGet(t, q)) // without the lock, metrics and all
			}
			// The next Get that finds nothing lets go of the entries.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := q.Get(ctx); err != context.DeadlineExceeded {
				t.Fatalf("Get on a quiet queue = %v, want DeadlineExceeded", err)
			}
			check(t, q)
			q.Add(7)
			if k := mustGet(t, q); k != 7 {
				t.Fatalf("Get = %d, want 7", k)
			}
			q.Done(7)
			q.mu.Lock()
			n := len(q.entries)
			q.mu.Unlock()
			if n != 1 {
				t.Fatalf("entries = %d after one key; want 1 (a small quiet queue keeps its entries)", n)
			}
		})
	})
	t.Run("unnamed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := New(Options[int]{})
			for k := range 5000 {
				q.Add(k)
			}
			ks := make([]int, 0, 5000)
			for range 5000 {
				ks = append(ks, mustGet(t, q))
			}
			for _, k := range ks {
				q.Done(k) // without the lock
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := q.Get(ctx); err != context.DeadlineExceeded {
				t.Fatalf("Get on a quiet queue = %v, want DeadlineExceeded", err)
			}
			check(t, q)
			quiet := func(d time.Duration) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				if _, err := q.Get(ctx); err != context.DeadlineExceeded {
					t.Fatalf("Get on a quiet queue = %v, want DeadlineExceeded", err)
				}
			}
			// As many keys as were dropped come back: kept once, for
			// quietHold, to see whether they are the same the next time.
			burst(t, q, 0)
			quiet(quietHold / 2)
			if n := held(q); n != 5000 {
				t.Fatalf("quiet queue holds %d entries after a burst as large as the one it released; want the 5000 kept", n)
			}
			// They were: the next burst reuses them, and they stay while
			// the quiet spell is shorter than quietHold.
			burst(t, q, 0)
			quiet(quietHold / 2)
			if n := held(q); n != 5000 {
				t.Fatalf("quiet queue holds %d entries after the same keys came back; want the 5000 kept", n)
			}
			// Quiet for longer (a settled controller): it lets go, though
			// no add or Done came.
			quiet(quietHold)
			check(t, q)
			// As many other keys: kept once again, for the hold.
			burst(t, q, 5000)
			quiet(quietHold / 2)
			if n := held(q); n != 5000 {
				t.Fatalf("quiet queue holds %d entries after a burst as large as the one its hold released; want the 5000 kept", n)
			}
			// Other keys again: none is reused, so the quiet queue lets go
			// at once.
			burst(t, q, 10000)
			quiet(quietHold / 2)
			check(t, q)
		})
	})
}

// A few keys back during the hold do not pin a quiet queue's entries: the
// hold starts again from the last of them, and when it passes with nothing
// handed out the queue lets go, with no add or Done to prompt it.
func TestQueue_QuietQueueLetsGoAfterTheHoldThoughAFewKeysCameBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[int]{})
		held := func() int {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.entries)
		}
		quiet := func(d time.Duration) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			if _, err := q.Get(ctx); err != context.DeadlineExceeded {
				t.Fatalf("Get on a quiet queue = %v, want DeadlineExceeded", err)
			}
		}
		wave := func(keys int) {
			for k := range keys {
				q.Add(k)
			}
			for range keys {
				q.Done(mustGet(t, q))
			}
		}
		wave(1000)
		quiet(quietHold / 2) // released: distinct keys, nothing before
		wave(1000)
		quiet(quietHold / 2) // as many made again: held
		if n := held(); n != 1000 {
			t.Fatalf("entries = %d after the second wave, want 1000 held", n)
		}
		for range 3 {
			wave(10) // a few keys back within the hold
			quiet(quietHold / 2)
			if n := held(); n != 1000 {
				t.Fatalf("entries = %d after a few keys came back within the hold, want 1000 held", n)
			}
		}
		quiet(quietHold)
		if n := held(); n != 0 {
			t.Fatalf("entries = %d after a quiet spell longer than quietHold, want 0", n)
		}
	})
}

// A queue whose keys come back (idle entries taken up again by adds) keeps
// its entries across quiet spells, so it does not rebuild them each time.
func TestQueue_QuietQueueKeepsEntriesOfKeysThatComeBack(t *testing.T) {
	q := New(Options[int]{Name: "comeback", Registerer: prometheus.NewRegistry()})
	const n = 1000
	comeBack := func() { // one key in flight while they come back: no quiet spell
		q.Add(-1)
		h := mustGet(t, q)
		for range 3 {
			for k := range n {
				q.Add(k)
			}
			for range n {
				q.Done(mustGet(t, q))
			}
		}
		q.Done(h) // quiet now: 2n reuses of n+1 entries
	}
	comeBack()
	q.mu.Lock()
	kept := len(q.entries)
	q.mu.Unlock()
	if kept != n+1 {
		t.Fatalf("entries = %d after keys came back; want %d kept", kept, n+1)
	}
}

// Adds without the lock (of idle keys, and raises of ready ones) must never
// leave a key ready while every worker sleeps. This runs on the real
// scheduler, not in a synctest bubble, in bursts separated by quiet spells:
// workers block and are woken over and over, and a quiet queue with more
// than quietKeep keys lets go of its entries between bursts. After each
// burst every key's last add must be seen by a hand-out, without any further
// add to nudge the queue.
func TestQueue_LockFreeAddsLoseNoWakeUpOnTheRealScheduler(t *testing.T) {
	const (
		keys      = 200
		producers = 3
		workers   = 6
		rounds    = 60
	)
	q := New(Options[int]{})
	var holders [keys]atomic.Int32
	var added, seen [keys]atomic.Int64
	var violations atomic.Int64
	progress := make(chan struct{}, 1)

	var wwg sync.WaitGroup
	for range workers {
		wwg.Go(func() {
			for {
				k, err := q.Get(context.Background())
				if err != nil {
					return
				}
				if holders[k].Add(1) != 1 {
					violations.Add(1)
				}
				seen[k].Store(added[k].Load())
				holders[k].Add(-1)
				q.Done(k)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		})
	}
	allSeen := func() bool {
		for k := range keys {
			if seen[k].Load() != added[k].Load() {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*deadline)
	defer cancel()
	for r := range rounds {
		var pwg sync.WaitGroup
		for p := range producers {
			pwg.Go(func() {
				// Later rounds touch fewer keys, so some entries go idle for
				// several rounds while others churn.
				n := keys - (r%4)*40
				for i := range 2000 {
					k := (i*13 + p*7 + r) % n
					added[k].Add(1)
					q.AddWithPriority(k, (i+p+r)%201-100)
				}
			})
		}
		pwg.Wait()
		for !allSeen() {
			select {
			case <-progress:
			case <-ctx.Done():
				for k := range keys {
					if s, a := seen[k].Load(), added[k].Load(); s != a {
						t.Errorf("key %d: last hand-out saw %d adds of %d", k, s, a)
					}
				}
				t.Fatalf("round %d: keys still owed with every worker idle: a wake-up was lost", r)
			}
		}
	}
	q.ShutDown()
	wwg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d times a key was handed out while another worker held it", v)
	}
}

// An add of a known idle key goes through the lock-free path; when every
// worker is blocked in Get at that moment, the add itself must wake one.
func TestQueue_AddWithoutTheLockWakesABlockedGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = quietKeep // a quiet queue of this size keeps its entries
		q := New(Options[int]{})
		handed := make(chan int, keys)
		var wg sync.WaitGroup
		defer func() { q.ShutDown(); wg.Wait() }()
		for range 2 {
			wg.Go(func() {
				for {
					k, err := q.Get(context.Background())
					if err != nil {
						return
					}
					q.Done(k)
					handed <- k
				}
			})
		}
		for k := range keys { // first sight: entries are made under the lock
			q.Add(k)
			synctest.Wait()
			<-handed
		}
		q.mu.Lock()
		q.publish() // the lock-free paths know every key
		q.mu.Unlock()
		for i := range 3 * keys {
			k := i * 7 % keys
			synctest.Wait() // both workers blocked in Get
			if hint := q.cached(k); hint.e == nil || hint.e.state() != 0 {
				t.Fatalf("key %d is not a known idle key; the test does not reach the lock-free path", k)
			}
			q.AddWithPriority(k, i%3-1)
			synctest.Wait()
			select {
			case got := <-handed:
				if got != k {
					t.Fatalf("handed out %d, want %d", got, k)
				}
			default:
				t.Fatalf("add %d of key %d: both workers stay blocked in Get: the add woke nobody", i, k)
			}
		}
	})
}
