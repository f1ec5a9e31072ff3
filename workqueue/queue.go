package workqueue

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// ErrShutDown is returned by Get once the queue has been shut down and has
// nothing left to hand out.
var ErrShutDown = errors.New("workqueue: queue is shut down")

// ErrDrainStopped is returned by ShutDownWithDrain when ShutDown was called
// while it waited: the usual "second signal" meaning "stop waiting now".
var ErrDrainStopped = errors.New("workqueue: ShutDown called while draining")

// DefaultAging is the Aging used when Options.Aging is zero: a waiting item
// gains one priority step every 100 ms, so an item at priority -100 is
// overtaken by newly added priority-0 items for at most 10 s.
const DefaultAging = 100 * time.Millisecond

// Options configure a Queue. The zero value is a working configuration: an
// unnamed queue (no metrics) on the real clock with the default rate
// limiter and DefaultAging.
type Options[K comparable] struct {
	// Name identifies the queue in metrics, as the "name" and "controller"
	// labels of the workqueue_* families. An empty Name records no metrics
	// and costs nothing for them.
	Name string

	// Registerer receives the queue's metrics when Name is set. Nil means
	// metrics.Registry from github.com/kloop-dev/kloop/metrics. Queues on one
	// Registerer share the metric families; New panics if the Registerer
	// already holds a different collector under the same names.
	Registerer prometheus.Registerer

	// RateLimiter decides the delay of AddRateLimited and answers
	// NumRequeues and Forget. Nil means the default on Clock: the larger
	// of a per-key back-off from 5 ms doubling up to 1000 s and an overall
	// bucket of 10 retries a second, burst 100 (NewControllerRateLimiter
	// makes that shape with other numbers).
	RateLimiter RateLimiter[K]

	// Clock is the source of time for delays, aging and metrics. Nil means
	// the real clock. The queue only reads it and creates timers on it from
	// goroutines blocked in Get, so k8s.io/utils/clock/testing.FakeClock
	// works, and so does the real clock inside a testing/synctest bubble.
	Clock clock.Clock

	// Aging is how long a ready item waits for its effective priority to
	// rise by one. Zero or negative means DefaultAging. See the package
	// documentation for the bound it gives.
	Aging time.Duration
}

// Queue is a work queue of keys: it de-duplicates keys that wait, never hands
// one key to two workers at once, delays keys on request, orders ready keys
// by priority with aging and FIFO among equals, and records metrics when
// named. See the package documentation for the full contract.
//
// A Queue is safe for concurrent use. Create one with New.
type Queue[K comparable] struct {
	// snap is a read-only copy of entries that Add consults without the
	// lock. It may lack recent keys and may hold evicted entries; both only
	// send a caller to the locked path.
	snap atomic.Pointer[map[K]ref[K]]

	mu sync.Mutex

	entries  map[K]*entry[K]
	slab     []entry[K] // entries not handed to any key yet
	slabbed  int        // entries carved from slabs so far
	freeEnt  *entry[K]  // evicted entries, linked through idleNext
	misses   int        // lookups the snapshot could not answer since it was made
	evicted  int        // entries evicted since the snapshot was made
	idle     idleList[K]
	handouts uint64
	// Idle entries taken up again by adds since releaseIfQuiet last
	// decided, and the hand-out count then.
	reused  int
	quietAt uint64
	// released is how many entries releaseIfQuiet last dropped; 0 once a
	// quiet spell has kept them since.
	released int
	// keptUntil, when not 0, is the queue time at which entries a quiet
	// spell kept are let go if the queue is still quiet, with no hand-out
	// since (see quietHold); the time keeper's timer wakes a Get for it.
	keptUntil int64

	// Ready entries live in ring while all of them have priority 0, and in
	// prio (ordered by aged priority) otherwise.
	ring     ring[K]
	prio     readyHeap[K]
	prioMode bool
	seq      uint64
	// stamp is set once the queue needs to know when keys became ready: from
	// the first time it enters priority order, or from the start when it
	// records metrics. Until then a pure FIFO queue reads no clock. Written
	// under the lock, read without it to read the clock before locking.
	stamp atomic.Bool

	delays delayHeap[K]
	dseq   uint64

	inFlight      atomic.Int64 // entries handed out and not Done
	dirtyInFlight int          // of those, entries to hand out again at Done

	// parked is a lock-free stack of entries that Done made idle without
	// the lock; Get puts them on the idle list.
	parked atomic.Pointer[entry[K]]

	// pending is a lock-free stack of entries made ready by adds that did
	// not take the lock (see tryPend). Every lock holder that looks at or
	// changes the ready keys drains it first (drainPending).
	pending atomic.Pointer[entry[K]]
	// raised is a lock-free stack of ready entries with a raise proposed
	// by an add that did not take the lock (see tryRaise); drainPending
	// applies them.
	raised atomic.Pointer[entry[K]]

	waiters    waiterList[K]
	waiterPool sync.Pool // of *waiter[K]; a woken Get returns its own without the lock
	// wakePending counts Gets woken with a reserved key that have not run
	// yet. While one is pending, newly ready keys wake nobody: the pending
	// Get wakes the next one when it runs, if keys are still ready then
	// (see chainWake). Workers thus join one after another as work demands,
	// instead of a wake per key.
	// Written under the lock, read without it by tryPend.
	wakePending atomic.Int32
	// keeper is the blocked Get that holds a timer for the earliest delay.
	// There is one whenever a Get is blocked and an entry is waiting.
	keeper *waiter[K]

	shuttingDown bool
	shut         atomic.Bool   // shuttingDown, for Done without the lock
	drained      chan struct{} // closed once shut down with nothing ready or in flight
	drainedDone  bool
	drainStop    chan struct{} // closed by ShutDown to release the ShutDownWithDrain calls waiting now

	clock   clock.Clock
	epoch   time.Time
	last    int64 // latest now()
	aging   int64
	maxStep int64 // largest |priority| that aged can multiply without overflow
	limiter RateLimiter[K]

	m *queueMetrics // nil when the queue is unnamed

	// WaitInFlight's waiters: while any is counted, Done takes the lock to
	// close doneCh (made by a waiter, under the lock).
	doneWaiters atomic.Int32
	doneCh      chan struct{}
}

// New returns an empty queue configured by cfg. It starts no goroutines; the
// queue never starts any.
func New[K comparable](cfg Options[K]) *Queue[K] {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	aging := cfg.Aging
	if aging <= 0 {
		aging = DefaultAging
	}
	rl := cfg.RateLimiter
	if rl == nil {
		rl = defaultRateLimiter[K](clk)
	}
	q := &Queue[K]{
		waiterPool: sync.Pool{New: func() any {
			return &waiter[K]{ch: make(chan struct{}, 1)}
		}},
		entries: make(map[K]*entry[K]),
		clock:   clk,
		epoch:   clk.Now(),
		aging:   int64(aging),
		maxStep: int64(math.MaxInt64/4) / int64(aging),
		limiter: rl,
	}
	if cfg.Name != "" {
		q.stamp.Store(true)
		q.m = newQueueMetrics(cfg.Name, cfg.Registerer)
		q.m.inflight.attach(cfg.Name, q)
	}
	return q
}

// Add marks k as needing processing at priority 0. See AddWithPriority.
func (q *Queue[K]) Add(k K) { q.AddWithPriority(k, 0) }

// AddWithPriority marks k as needing processing. Higher priorities are handed
// out first, equal ones in the order they became ready, and every ready key's
// effective priority rises by one per Options.Aging. If k is already waiting
// to be handed out, it is not added twice; its priority becomes the higher of
// the two. If k is being processed, it is handed out again after its Done.
// If k is delayed, it becomes ready now. After ShutDown, Add does nothing.
func (q *Queue[K]) AddWithPriority(k K, priority int) {
	p := int64(priority)
	hint := q.cached(k)
	if hint.e != nil {
		if hint.covers(p) {
			return // already due to be handed out at this priority or higher
		}
		if q.tryPend(hint, p) || q.tryRaise(hint, p) {
			return
		}
	}
	t := q.preStamp()
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		return
	}
	q.drainPending()
	e := q.lookup(k, hint)
	if e == nil {
		e = q.newEntry(k)
		e.setPrio(p)
		q.makeReady(e, q.stampAt(t))
		q.mu.Unlock()
		return
	}
	q.addLocked(e, p, t)
	q.mu.Unlock()
}

// addLocked applies an add at priority p (clock read t, see preStamp) to an
// existing entry. Called with the lock held.
func (q *Queue[K]) addLocked(e *entry[K], p int64, t int64) {
	for {
		switch s := e.state(); {
		case s == 0:
			if !q.claimIdle(e, p) {
				continue
			}
			q.makeReady(e, q.stampAt(t))
		case s == stReserved:
			// Being handed out right now: this add is covered.
		case s == stPending:
			// Made pending without the lock since this caller drained the
			// pending stack; it becomes ready, at the time of that add,
			// when drained.
			e.maxPrio(p)
		case s&stReady != 0:
			if p > e.prio() {
				q.raise(e, p, q.stampAt(t))
			}
		case s == stInFlight:
			// Done may make it idle under us; then start over.
			if !e.casState(stInFlight, stInFlight|stDirty) {
				continue
			}
			q.dirtyInFlight++
			if p > e.prio() {
				e.setPrio(p)
			}
		case s&stInFlight != 0:
			if p > e.prio() {
				e.setPrio(p)
			}
			if s&stDirty == 0 { // in flight and waiting
				q.delays.remove(e)
				e.setState(stInFlight | stDirty)
				q.dirtyInFlight++
			}
		default: // waiting
			if p > e.prio() {
				e.setPrio(p)
			}
			q.delays.remove(e)
			q.makeReady(e, q.stampAt(t))
		}
		return
	}
}

// AddAfter adds k at priority 0 once d has passed; a d <= 0 is Add. If k is
// already delayed, the sooner of the two times wins; if k is already ready,
// or in flight and added again, it stays as it is. If k is in flight and not
// added again, it is delayed and, if still in flight when d has passed,
// handed out again after its Done. Delays are kept in one heap and served by
// at most one timer, held by a goroutine blocked in Get. After ShutDown,
// AddAfter does nothing.
func (q *Queue[K]) AddAfter(k K, d time.Duration) { q.addAfter(k, d, 0) }

// addAfter is AddAfter at a priority: a key already ready, or in flight and
// added again, takes the higher of the two priorities.
func (q *Queue[K]) addAfter(k K, d time.Duration, priority int) {
	if d <= 0 {
		q.AddWithPriority(k, priority)
		return
	}
	p := int64(priority)
	hint := q.cached(k)
	t := q.elapsed()
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		return
	}
	if q.m != nil {
		q.m.retries.Inc()
	}
	q.drainPending()
	now := q.settle(t)
	e := q.lookup(k, hint)
	if e == nil {
		e = q.newEntry(k)
		e.setPrio(p)
		q.schedule(e, stWaiting, now+int64(d))
		q.mu.Unlock()
		return
	}
	q.addAfterLocked(e, p, now+int64(d))
	q.mu.Unlock()
}

// claimIdle takes an idle entry up for an add at priority p under the lock:
// it leaves the idle list and is held in state pending, which the caller then
// moves on (ready or waiting). It reports false if an add without the lock
// claimed the entry first; the caller then looks at its state again. Called
// with the lock held.
func (q *Queue[K]) claimIdle(e *entry[K], p int64) bool {
	if !e.casState(0, stPending) {
		return false
	}
	q.unlistIdle(e)
	q.reused++
	e.maxPrio(p)
	return true
}

// addAfterLocked applies an add at priority p due at time at to an existing
// entry. Called with the lock held.
func (q *Queue[K]) addAfterLocked(e *entry[K], p int64, at int64) {
	for {
		switch s := e.state(); {
		case s == 0:
			if !q.claimIdle(e, p) {
				continue
			}
			q.schedule(e, stWaiting, at)
		case s == stReserved:
			// Being handed out right now, sooner than at.
		case s == stPending:
			e.maxPrio(p) // ready when drained, sooner than at
		case s&stReady != 0:
			if p > e.prio() {
				q.raise(e, p, q.now())
			}
		case s&stDirty != 0:
			if p > e.prio() {
				e.setPrio(p)
			}
		case s&stWaiting != 0:
			if p > e.prio() {
				e.setPrio(p)
			}
			if at < e.readyAt {
				e.readyAt = at
				q.delays.up(int(e.didx))
				if e.didx == 0 {
					q.wakeKeeper()
				}
			}
		default: // in flight, not added again; Done may make it idle under us
			if !e.casState(stInFlight, stInFlight|stWaiting) {
				continue
			}
			if p > e.prio() {
				e.setPrio(p)
			}
			q.schedule(e, stInFlight|stWaiting, at)
		}
		return
	}
}

// AddRateLimited adds k after the delay the rate limiter gives it, which
// also counts a requeue for k. After ShutDown it does nothing, not even
// count.
func (q *Queue[K]) AddRateLimited(k K) {
	if q.shuttingDownNow() {
		return
	}
	q.AddAfter(k, q.limiter.When(k))
}

// Forget tells the rate limiter that k is no longer retried (it succeeded or
// was given up), which resets its back-off. It does not remove k from the
// queue.
func (q *Queue[K]) Forget(k K) { q.limiter.Forget(k) }

// NumRequeues reports how many times k went through AddRateLimited since its
// last Forget, as counted by the rate limiter.
func (q *Queue[K]) NumRequeues(k K) int { return q.limiter.NumRequeues(k) }

// Get blocks until a key is ready and hands it out; the caller owns the key
// until it calls Done(key), exactly once. While a key is owned, Get does not
// hand it out again.
//
// Get returns ctx.Err() if ctx is done before a key is handed out (a key is
// never lost that way). After ShutDown, Get keeps handing out the keys that
// were ready, and those added while in flight once they are Done, and then
// returns ErrShutDown.
func (q *Queue[K]) Get(ctx context.Context) (K, error) {
	done := ctx.Done()
	if done != nil {
		select {
		case <-done:
			var zero K
			return zero, ctx.Err()
		default:
		}
	}
	q.mu.Lock()
	if q.parked.Load() != nil {
		q.listParked()
	}
	q.drainPending()
	if q.delays.len() > 0 {
		q.promote(q.now())
	}
	if e := q.popReady(); e != nil {
		q.handOut(e, e.prio())
		k := e.key
		q.mu.Unlock()
		return k, nil
	}
	return q.wait(ctx, done)
}

// wait blocks for a key; q.mu is held on entry and released on return.
func (q *Queue[K]) wait(ctx context.Context, done <-chan struct{}) (K, error) {
	var zero K
	for {
		if q.shuttingDown && q.dirtyInFlight == 0 {
			q.mu.Unlock()
			return zero, ErrShutDown
		}
		w := q.newWaiter()
		q.waiters.pushBack(w)
		// Listed first, then look: an add without the lock either sees
		// this Get listed, or pushed its entry before this drain, which
		// may then reserve it for this very Get.
		q.drainPending()
		// About to block: if the queue has gone quiet (Dones without the
		// lock leave that to the next Get), let go of its entries.
		if q.parked.Load() != nil {
			q.listParked()
		}
		q.releaseIfQuiet()
		var tick <-chan time.Time
		if q.keeper == nil && q.timed() {
			q.keeper, w.keeping = w, true
			tick = q.arm(w, time.Duration(q.nextTime()-q.now()))
		}
		q.mu.Unlock()

		token := false
		select {
		case <-w.ch:
			token = true
		case <-tick:
		case <-done:
		}

		q.mu.Lock()
		if w.listed {
			q.waiters.remove(w)
		} else if !token {
			<-w.ch // sent under the lock when w was unlisted
		}
		keeper := w.keeping
		if keeper {
			q.keeper, w.keeping = nil, false
			q.disarm(w)
		}
		e := w.e
		w.e = nil
		q.waiterPool.Put(w)
		if e != nil {
			// Reserved for us even if ctx is done: a key is never dropped.
			e.setState(stInFlight)
			q.wakePending.Add(-1)
			q.drainPending()
			q.chainWake()
		} else if done != nil {
			select {
			case <-done:
				if keeper {
					q.ensureKeeper()
				}
				q.mu.Unlock()
				return zero, ctx.Err()
			default:
			}
		}
		if e == nil {
			q.drainPending()
			if q.delays.len() > 0 {
				q.promote(q.now())
			}
			if e = q.popReady(); e != nil {
				q.handOut(e, e.prio())
			}
		}
		if e != nil {
			if keeper {
				q.ensureKeeper()
			}
			k := e.key
			q.mu.Unlock()
			return k, nil
		}
		// Nothing for us: block again (and keep time again if needed).
	}
}

// Done tells the queue that processing of k, handed out by Get, is finished.
// If k was added while in flight it becomes ready again now. Call Done
// exactly once per Get; Done for a key that is not in flight does nothing.
func (q *Queue[K]) Done(k K) {
	hint := q.cached(k)
	if q.doneWithoutLock(hint) {
		return
	}
	t := q.preStamp()
	q.mu.Lock()
	q.drainPending()
	e := q.lookup(k, hint)
	if e == nil {
		q.mu.Unlock()
		return
	}
	s := e.state()
	if s == stInFlight {
		if !e.casState(stInFlight, 0) {
			q.mu.Unlock() // someone else finished it
			return
		}
	} else if s&stInFlight == 0 {
		q.mu.Unlock()
		return
	}
	q.inFlight.Add(-1)
	if q.m != nil {
		q.finishMetrics(e)
	}
	switch {
	case s&stDirty != 0:
		q.dirtyInFlight--
		q.makeReady(e, q.stampAt(t))
	case s&stWaiting != 0:
		e.setState(stWaiting)
	default: // already made idle by the CAS above
		q.listIdle(e)
		q.releaseIfQuiet()
	}
	if q.shuttingDown {
		q.shutdownProgress()
	}
	q.signalDone()
	q.mu.Unlock()
}

// doneWithoutLock is Done in the common case, a key in flight that nobody
// added again: the entry goes idle and onto the parked stack, and the work
// duration goes to the histogram, whose own atomics make that safe, all
// without the lock. It reports false, having changed nothing, when the
// case is another one (or shutdown has begun); Done then takes the lock.
func (q *Queue[K]) doneWithoutLock(hint ref[K]) bool {
	e := hint.e
	if e == nil || q.shut.Load() {
		return false
	}
	v := e.vs.Load()
	if uint32(v>>vsIncShift) != hint.inc || uint8(v) != stInFlight {
		return false
	}
	// The entry is this key's and in flight, so nothing but this Done
	// writes it now: startedAt is the hand-out's.
	started := e.startedAt
	if !e.vs.CompareAndSwap(v, nextVS(v, 0)) {
		return false
	}
	q.inFlight.Add(-1)
	q.park(e)
	if q.m != nil {
		q.m.work.Observe(float64(max(q.elapsed()-started, 0)) / 1e9)
	}
	// Checked after the state change, so that a WaitInFlight that counted
	// itself before it saw the key in flight is woken.
	if q.shut.Load() || q.doneWaiters.Load() != 0 {
		q.mu.Lock()
		if q.shuttingDown {
			q.shutdownProgress() // ShutDown came in between: report progress
		}
		q.signalDone()
		q.mu.Unlock()
	}
	return true
}

// WaitInFlight waits until no key that match accepts is in flight (handed
// out by Get, or about to be, and not yet Done), or ctx is done (then it
// returns ctx's error). Keys handed out after it returns are not its
// concern: whoever hands keys to workers keeps those out itself. It is how
// a worker pool gives a set of keys away without overlap: stop taking
// them, then wait here. match is called with the queue's lock held, so
// it must be fast and must not call the queue.
func (q *Queue[K]) WaitInFlight(ctx context.Context, match func(K) bool) error {
	q.doneWaiters.Add(1)
	defer q.doneWaiters.Add(-1)
	for {
		q.mu.Lock()
		busy := false
		for k, e := range q.entries {
			if e.state()&(stInFlight|stReserved) != 0 && match(k) {
				busy = true
				break
			}
		}
		if !busy {
			q.mu.Unlock()
			return nil
		}
		if q.doneCh == nil {
			q.doneCh = make(chan struct{})
		}
		ch := q.doneCh
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signalDone wakes the WaitInFlight calls after a Done. Called with the
// lock held.
func (q *Queue[K]) signalDone() {
	if q.doneCh != nil {
		close(q.doneCh)
		q.doneCh = nil
	}
}

// shuttingDownNow reports whether ShutDown or ShutDownWithDrain was called
// (Status().ShuttingDown, without the rest of the status).
func (q *Queue[K]) shuttingDownNow() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// ShutDown stops the queue from accepting keys: later adds do nothing and
// delayed keys are dropped. Keys already ready, and keys added while in
// flight, are still handed out by Get; after that Get returns ErrShutDown.
// ShutDown does not wait; it may be called more than once. It releases every
// ShutDownWithDrain that is waiting at the time (they return
// ErrDrainStopped), as client-go's queue does.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	q.shutDownLocked()
	if q.drainStop != nil {
		close(q.drainStop)
		q.drainStop = nil
	}
	q.mu.Unlock()
}

// ShutDownWithDrain shuts the queue down like ShutDown and then waits until
// every ready key has been handed out and every key in flight is Done. It
// returns nil when drained, ctx.Err() if ctx ends first, or ErrDrainStopped
// if ShutDown is called meanwhile (the queue stays shut down either way).
// Draining needs workers that keep calling Get and Done.
func (q *Queue[K]) ShutDownWithDrain(ctx context.Context) error {
	q.mu.Lock()
	q.shutDownLocked()
	if q.drainedDone {
		q.mu.Unlock()
		return nil
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	if q.drainStop == nil {
		q.drainStop = make(chan struct{})
	}
	ch, stop := q.drained, q.drainStop
	q.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-stop:
		select {
		case <-ch: // drained as well: that is the better answer
			return nil
		default:
		}
		return ErrDrainStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *Queue[K]) shutDownLocked() {
	if !q.shuttingDown {
		q.drainPending() // adds that returned before ShutDown count
		q.shuttingDown = true
		q.shut.Store(true)
		for q.delays.len() > 0 {
			e := q.delays.first()
			q.delays.remove(e)
			if s := e.state() &^ stWaiting; s != 0 {
				if s == stInFlight {
					e.setPrio(noPriority) // not added again
				}
				e.setState(s)
			} else {
				e.setPrio(noPriority)
				e.setState(0)
				q.listIdle(e)
			}
		}
	}
	q.shutdownProgress()
}

// shutdownProgress wakes blocked Gets once nothing more can be handed out and
// marks the queue drained once nothing is in flight either.
func (q *Queue[K]) shutdownProgress() {
	if q.ring.n+q.prio.len() != 0 || q.dirtyInFlight != 0 {
		return
	}
	for q.waiters.head != nil {
		q.wake(q.waiters.head, nil)
	}
	if q.inFlight.Load() == 0 && !q.drainedDone {
		q.drainedDone = true
		if q.drained != nil {
			close(q.drained)
		}
		if q.m != nil {
			q.m.inflight.detach(q.m.name, q)
		}
	}
}
