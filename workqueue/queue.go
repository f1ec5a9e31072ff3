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

// DefaultAging is the Aging used when Config.Aging is zero: a waiting item
// gains one priority step every 100 ms, so an item at priority -100 is
// overtaken by newly added priority-0 items for at most 10 s.
const DefaultAging = 100 * time.Millisecond

// Config configures a Queue. The zero value is a working configuration: an
// unnamed queue (no metrics) on the real clock with DefaultRateLimiter and
// DefaultAging.
type Config[K comparable] struct {
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
	// NumRequeues and Forget. Nil means DefaultRateLimiter on Clock.
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

	inFlight      int // entries handed out and not Done
	dirtyInFlight int // of those, entries to hand out again at Done

	waiters     waiterList[K]
	freeWaiters []*waiter[K]
	// keeper is the blocked Get that holds a timer for the earliest delay.
	// There is one whenever a Get is blocked and an entry is waiting.
	keeper *waiter[K]

	shuttingDown bool
	drained      chan struct{} // closed once shut down with nothing ready or in flight
	drainedDone  bool

	clock   clock.Clock
	epoch   time.Time
	last    int64 // latest now()
	aging   int64
	maxStep int64 // largest |priority| that aged can multiply without overflow
	limiter RateLimiter[K]

	m      *queueMetrics // nil when the queue is unnamed
	flight []*entry[K]   // in-flight entries, kept only for metrics
}

// New returns an empty queue configured by cfg. It starts no goroutines; the
// queue never starts any.
func New[K comparable](cfg Config[K]) *Queue[K] {
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
		rl = DefaultRateLimiter[K](clk)
	}
	q := &Queue[K]{
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

// elapsed reads the clock: nanoseconds since New. Safe without the lock.
func (q *Queue[K]) elapsed() int64 { return int64(q.clock.Since(q.epoch)) }

// now is the queue's time: nanoseconds since New, never going backwards even
// if the clock does. Called with the lock held.
func (q *Queue[K]) now() int64 { return q.settle(q.elapsed()) }

// settle turns a time read before taking the lock into the queue's time,
// keeping it monotonic across callers. Called with the lock held.
func (q *Queue[K]) settle(t int64) int64 {
	if t < q.last {
		return q.last
	}
	q.last = t
	return t
}

// unstamped is the readySince of a key that became ready while the queue did
// not stamp.
const unstamped = math.MinInt64

// preStamp reads the clock before the lock is taken if the queue stamps
// ready times (keeping the read out of the critical section), else returns
// unstamped.
func (q *Queue[K]) preStamp() int64 {
	if q.stamp.Load() {
		return q.elapsed()
	}
	return unstamped
}

// stampAt turns what preStamp returned into a ready time. Called with the
// lock held.
func (q *Queue[K]) stampAt(t int64) int64 {
	switch {
	case t != unstamped:
		return q.settle(t)
	case q.stamp.Load(): // turned on since preStamp
		return q.now()
	}
	return unstamped
}

// cached looks k up in the snapshot, without the lock.
func (q *Queue[K]) cached(k K) ref[K] {
	if m := q.snap.Load(); m != nil {
		return (*m)[k]
	}
	return ref[K]{}
}

// lookup returns k's entry, or nil; hint is what cached returned. Called
// with the lock held.
func (q *Queue[K]) lookup(k K, hint ref[K]) *entry[K] {
	if hint.e != nil && hint.e.incarnation() == hint.inc {
		return hint.e
	}
	q.misses++
	if q.misses > 16 && q.misses > len(q.entries) {
		q.publish()
	}
	return q.entries[k]
}

// publish replaces the snapshot with a copy of entries. It runs after as many
// misses (or evictions) as there are entries, so it costs a constant per
// miss, and a queue whose keys are known runs without it.
func (q *Queue[K]) publish() {
	m := make(map[K]ref[K], len(q.entries))
	for k, e := range q.entries {
		m[k] = ref[K]{e, e.incarnation()}
	}
	q.snap.Store(&m)
	q.misses, q.evicted = 0, 0
}

// Add marks k as needing processing at priority 0. See AddWithPriority.
func (q *Queue[K]) Add(k K) { q.AddWithPriority(k, 0) }

// AddWithPriority marks k as needing processing. Higher priorities are handed
// out first, equal ones in the order they became ready, and every ready key's
// effective priority rises by one per Config.Aging. If k is already waiting
// to be handed out, it is not added twice; its priority becomes the higher of
// the two. If k is being processed, it is handed out again after its Done.
// If k is delayed, it becomes ready now. After ShutDown, Add does nothing.
func (q *Queue[K]) AddWithPriority(k K, priority int) {
	p := int64(priority)
	hint := q.cached(k)
	if hint.e != nil && hint.covers(p) {
		return // already due to be handed out at this priority or higher
	}
	t := q.preStamp()
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		return
	}
	e := q.lookup(k, hint)
	if e == nil {
		e = q.newEntry(k)
		e.setPrio(p)
		q.makeReady(e, q.stampAt(t))
		q.mu.Unlock()
		return
	}
	switch s := e.state(); {
	case s == 0:
		q.idle.remove(e)
		e.setPrio(p)
		q.makeReady(e, q.stampAt(t))
	case s&stReady != 0:
		if p > e.prio() {
			q.raise(e, p, q.stampAt(t))
		}
	case s&stInFlight != 0:
		if p > e.prio() {
			e.setPrio(p)
		}
		if s&stDirty == 0 {
			if s&stWaiting != 0 {
				q.delays.remove(e)
			}
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
	q.mu.Unlock()
}

// AddAfter adds k at priority 0 once d has passed. See AddAfterWithPriority.
func (q *Queue[K]) AddAfter(k K, d time.Duration) { q.AddAfterWithPriority(k, d, 0) }

// AddAfterWithPriority adds k with the given priority once d has passed; a
// d <= 0 is AddWithPriority. If k is already delayed, the sooner of the two
// times wins; if k is already ready, or in flight and added again, it only
// takes the higher priority. If k is in flight and not added again, it is
// delayed and, if still in flight when d has passed, handed out again after
// its Done. Delays are kept in one heap and served by at most one timer, held
// by a goroutine blocked in Get. After ShutDown, AddAfter does nothing.
func (q *Queue[K]) AddAfterWithPriority(k K, d time.Duration, priority int) {
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
	now := q.settle(t)
	e := q.lookup(k, hint)
	if e == nil {
		e = q.newEntry(k)
		e.setPrio(p)
		q.schedule(e, stWaiting, now+int64(d))
		q.mu.Unlock()
		return
	}
	switch s := e.state(); {
	case s == 0:
		q.idle.remove(e)
		e.setPrio(p)
		q.schedule(e, stWaiting, now+int64(d))
	case s&stReady != 0:
		if p > e.prio() {
			q.raise(e, p, now)
		}
	case s&stDirty != 0:
		if p > e.prio() {
			e.setPrio(p)
		}
	case s&stWaiting != 0:
		if p > e.prio() {
			e.setPrio(p)
		}
		if at := now + int64(d); at < e.readyAt {
			e.readyAt = at
			q.delays.up(int(e.didx))
			if e.didx == 0 {
				q.wakeKeeper()
			}
		}
	default: // in flight, not added again
		if p > e.prio() {
			e.setPrio(p)
		}
		q.schedule(e, stInFlight|stWaiting, now+int64(d))
	}
	q.mu.Unlock()
}

// AddRateLimited adds k after the delay the rate limiter gives it, which
// also counts a requeue for k. After ShutDown it does nothing, not even
// count.
func (q *Queue[K]) AddRateLimited(k K) {
	if q.ShuttingDown() {
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
		var tick <-chan time.Time
		if q.keeper == nil && q.delays.len() > 0 {
			q.keeper = w
			tick = q.arm(w, time.Duration(q.delays.first().readyAt-q.now()))
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
		keeper := q.keeper == w
		if keeper {
			q.keeper = nil
			q.disarm(w)
		}
		e := w.e
		w.e = nil
		q.freeWaiters = append(q.freeWaiters, w)
		if e == nil && done != nil {
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
	t := q.preStamp()
	q.mu.Lock()
	e := q.lookup(k, hint)
	if e == nil || e.state()&stInFlight == 0 {
		q.mu.Unlock()
		return
	}
	q.inFlight--
	if q.m != nil {
		q.finishMetrics(e)
	}
	switch s := e.state(); {
	case s&stDirty != 0:
		q.dirtyInFlight--
		q.makeReady(e, q.stampAt(t))
	case s&stWaiting != 0:
		e.setState(stWaiting)
	default:
		q.makeIdle(e)
	}
	if q.shuttingDown {
		q.shutdownProgress()
	}
	q.mu.Unlock()
}

// Len reports how many keys are ready to be handed out, not counting keys in
// flight or delayed. It is for information only: the answer may be stale
// before it is used.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.delays.len() > 0 {
		q.promote(q.now())
	}
	return q.ring.n + q.prio.len()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// ShutDown stops the queue from accepting keys: later adds do nothing and
// delayed keys are dropped. Keys already ready, and keys added while in
// flight, are still handed out by Get; after that Get returns ErrShutDown.
// ShutDown does not wait; it may be called more than once.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	q.shutDownLocked()
	q.mu.Unlock()
}

// ShutDownWithDrain shuts the queue down like ShutDown and then waits until
// every ready key has been handed out and every key in flight is Done. It
// returns nil when drained, or ctx.Err() if ctx ends first (the queue stays
// shut down). Draining needs workers that keep calling Get and Done.
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
	ch := q.drained
	q.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *Queue[K]) shutDownLocked() {
	if !q.shuttingDown {
		q.shuttingDown = true
		for q.delays.len() > 0 {
			e := q.delays.first()
			q.delays.remove(e)
			if s := e.state() &^ stWaiting; s != 0 {
				e.setState(s)
			} else {
				q.makeIdle(e)
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
	if q.inFlight == 0 && !q.drainedDone {
		q.drainedDone = true
		if q.drained != nil {
			close(q.drained)
		}
		if q.m != nil {
			q.m.inflight.detach(q.m.name, q)
		}
	}
}

// newEntry maps k to a fresh incarnation of a recycled or new entry, idle
// and not listed.
func (q *Queue[K]) newEntry(k K) *entry[K] {
	e := q.freeEnt
	if e != nil {
		q.freeEnt = e.idleNext
		e.idleNext = nil
	} else {
		if len(q.slab) == 0 {
			// Slabs grow with the queue, so a small queue stays small and
			// a large one allocates O(log n) times.
			n := min(max(q.slabbed, 16), 4096)
			q.slab = make([]entry[K], n)
			q.slabbed += n
		}
		e = &q.slab[0]
		q.slab = q.slab[1:]
	}
	e.reincarnate(0)
	e.key = k
	e.hidx, e.didx, e.fidx = -1, -1, -1
	q.entries[k] = e
	return e
}

// An entry idle for more than max(minIdleWindow, idleWindowFactor × entries
// held) hand-outs is evicted. A key that comes back sooner keeps its entry:
// with keys re-added at random, the gap between two adds of one key is about
// as many adds as there are keys, and rarely eight times that. Memory for keys
// that stopped coming is reclaimed after a bounded amount of work.
const (
	minIdleWindow    = 1 << 16
	idleWindowFactor = 8
)

// makeIdle parks an entry that nothing refers to any more on the idle list,
// and evicts up to two entries that have been idle too long (so eviction
// keeps pace with parking and costs a constant per call).
func (q *Queue[K]) makeIdle(e *entry[K]) {
	e.setState(0)
	e.idleAt = q.handouts
	q.idle.pushBack(e)
	window := uint64(max(minIdleWindow, idleWindowFactor*len(q.entries)))
	for range 2 {
		old := q.idle.head
		if old == nil || q.handouts-old.idleAt <= window {
			break
		}
		q.idle.remove(old)
		delete(q.entries, old.key)
		var zero K
		old.key = zero // release what the key refers to
		old.reincarnate(stEvicted)
		old.idleNext = q.freeEnt
		q.freeEnt = old
		q.evicted++
	}
	if q.evicted > 16 && q.evicted > len(q.entries) {
		q.publish() // drop evicted keys from the snapshot
	}
}

// makeReady makes an entry that is in no structure ready at time t (now, or
// unstamped), with the priority it has: it goes straight to a blocked Get if
// there is one (then nothing else is ready), else into the ready structure.
func (q *Queue[K]) makeReady(e *entry[K], t int64) {
	q.seq++
	e.seq = q.seq
	if !q.stamp.Load() {
		t = unstamped // keep the ring uniform until the first stamp
	}
	e.readySince = t
	p := e.prio()
	if q.m != nil {
		q.m.adds.Inc()
		q.m.depth(p).Inc()
	}
	if w := q.pickWaiter(); w != nil {
		q.handOut(e, p)
		q.wake(w, e)
		return
	}
	e.setState(stReady)
	if !q.prioMode {
		if p == 0 {
			q.ring.push(e)
			return
		}
		q.enterPrioMode()
	}
	if e.readySince == unstamped {
		e.readySince = q.now()
	}
	e.order = q.aged(e.readySince, p)
	q.prio.push(e)
}

// raise gives a ready entry a higher priority. Its aged order only ever moves
// forward, so a raise never costs an entry the age it has already gained.
func (q *Queue[K]) raise(e *entry[K], priority int64, now int64) {
	if q.m != nil {
		q.m.depth(e.prio()).Dec()
		q.m.depth(priority).Inc()
	}
	e.setPrio(priority)
	if !q.prioMode {
		q.enterPrioMode()
	}
	if now == unstamped {
		now = q.now()
	}
	if o := q.aged(now, priority); o < e.order {
		e.order = o
		q.prio.fix(e)
	}
}

// enterPrioMode moves the ring into the (empty) ready heap. Ring entries all
// have priority 0, so their order is the time they became ready, which grows
// along the ring: appended in ring order they already form a valid heap. The
// first time, the ring holds unstamped entries only; they count as ready
// from now, and the queue stamps from then on.
func (q *Queue[K]) enterPrioMode() {
	q.prioMode = true
	q.stamp.Store(true)
	now := int64(unstamped)
	for e := q.ring.pop(); e != nil; e = q.ring.pop() {
		if e.readySince == unstamped {
			if now == unstamped {
				now = q.now()
			}
			e.readySince = now
		}
		e.order = e.readySince
		q.prio.appendSorted(e)
	}
}

// aged is the ready heap order of an entry ready at t with priority p:
// t minus p aging steps, saturated so that extreme priorities cannot wrap.
func (q *Queue[K]) aged(t int64, p int64) int64 {
	pp := min(max(p, -q.maxStep), q.maxStep)
	return t - pp*q.aging
}

func (q *Queue[K]) popReady() *entry[K] {
	if q.prioMode {
		if q.prio.len() == 0 {
			return nil
		}
		e := q.prio.pop()
		if q.prio.len() == 0 {
			q.prioMode = false
		}
		return e
	}
	return q.ring.pop()
}

// handOut moves an entry that is out of the ready structure, and was ready
// at priority p, to in flight.
func (q *Queue[K]) handOut(e *entry[K], p int64) {
	if q.m != nil {
		q.startMetrics(e, p)
	}
	e.setState(stInFlight)
	e.setPrio(noPriority)
	q.inFlight++
	q.handouts++
}

// schedule puts an entry into the delay heap in the given state, waking the
// time keeper when it is the new earliest.
func (q *Queue[K]) schedule(e *entry[K], state uint8, at int64) {
	e.readyAt = at
	q.dseq++
	e.dseq = q.dseq
	e.setState(state)
	q.delays.push(e)
	if e.didx == 0 {
		q.wakeKeeper()
	}
}

// promote makes every entry whose delay has passed ready, as of now (when
// the queue sees it due: a timer fired, or Get or Len ran).
func (q *Queue[K]) promote(now int64) {
	for q.delays.len() > 0 && q.delays.first().readyAt <= now {
		e := q.delays.first()
		q.delays.remove(e)
		if e.state()&stInFlight != 0 {
			e.setState(stInFlight | stDirty)
			q.dirtyInFlight++
			continue
		}
		q.makeReady(e, now)
	}
}

// pickWaiter unlists the blocked Get that should receive a ready entry: the
// most recent one (its goroutine is the likeliest to be warm), but not the
// time keeper while another is blocked.
func (q *Queue[K]) pickWaiter() *waiter[K] {
	w := q.waiters.tail
	if w == nil {
		return nil
	}
	if w == q.keeper && w.prev != nil {
		w = w.prev
	}
	return w
}

// wake unlists w and sends its token, handing it e (or nil: look again).
func (q *Queue[K]) wake(w *waiter[K], e *entry[K]) {
	q.waiters.remove(w)
	w.e = e
	w.ch <- struct{}{}
}

// wakeKeeper makes some blocked Get (re)arm its timer for the earliest delay.
func (q *Queue[K]) wakeKeeper() {
	if q.keeper != nil {
		if q.keeper.listed {
			q.wake(q.keeper, nil)
		}
		return
	}
	if q.waiters.tail != nil {
		q.wake(q.waiters.tail, nil)
	}
}

// ensureKeeper is called when the time keeper leaves: another blocked Get
// takes over if delays are pending.
func (q *Queue[K]) ensureKeeper() {
	if q.keeper == nil && q.delays.len() > 0 && q.waiters.tail != nil {
		q.wake(q.waiters.tail, nil)
	}
}

func (q *Queue[K]) newWaiter() *waiter[K] {
	if n := len(q.freeWaiters); n > 0 {
		w := q.freeWaiters[n-1]
		q.freeWaiters[n-1] = nil
		q.freeWaiters = q.freeWaiters[:n-1]
		return w
	}
	return &waiter[K]{ch: make(chan struct{}, 1)}
}

func (q *Queue[K]) arm(w *waiter[K], d time.Duration) <-chan time.Time {
	if w.timer == nil {
		w.timer = q.clock.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	return w.timer.C()
}

func (q *Queue[K]) disarm(w *waiter[K]) {
	if !w.timer.Stop() {
		// Clocks with buffered timer channels (fake clocks) may hold a
		// stale tick; the real clock's timers never do.
		select {
		case <-w.timer.C():
		default:
		}
	}
}
