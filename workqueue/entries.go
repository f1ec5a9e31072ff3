package workqueue

import (
	"math"
	"sync/atomic"
	"time"
)

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
	e.setPrio(noPriority)
	e.key = k
	e.hidx, e.didx = -1, -1
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

// quietHold is how long a quiet queue keeps the entries of keys that come
// back (see releaseIfQuiet) before it lets go of them, if nothing was
// handed out meanwhile. A burst of the same keys back within it reuses
// their entries; one later makes them anew (an allocation per key, from
// slabs), and a settled controller holds no entry after it.
const quietHold = 100 * time.Millisecond

// quietKeep is how many entries a quiet queue may keep; one that holds more
// when it goes quiet drops them all (see releaseIfQuiet).
const quietKeep = 64

// releaseIfQuiet drops every entry, the slabs they were carved from, the free
// list and the snapshot once the queue is quiet (nothing ready, pending,
// delayed or in flight), unless its keys tend to come back: since it last
// decided, adds took idle entries up again (reused them) at least half as
// often as there are entries now, or the entries it last dropped have been
// made again, at least half as many (then it keeps them once, to see). It decides at most once per as many
// hand-outs as there are entries, so a busy queue that keeps emptying out
// pays a constant per hand-out for the check, and a queue whose keys come
// back often keeps its entries and stays allocation-free. A controller whose
// queue has drained after a burst of distinct keys (an initial list, a
// resync) holds no memory per key once it is quiet, as it holds none for keys
// it has not seen; maps and slabs never shrink otherwise. Every entry created
// since the last decision has been handed out at least once, so the quiet
// spell after a burst always decides. Called with the lock held.
func (q *Queue[K]) releaseIfQuiet() {
	if len(q.entries) <= quietKeep || q.inFlight.Load() != 0 ||
		q.ring.n+q.prio.len() != 0 || q.delays.len() != 0 ||
		q.pending.Load() != nil || q.raised.Load() != nil {
		return
	}
	if q.keptUntil != 0 {
		switch {
		case q.handouts == q.quietAt: // quiet since the hold began
			if q.now() < q.keptUntil {
				return
			}
			q.keptUntil = 0
			q.released = len(q.entries)
			q.release()
			return
		case q.handouts-q.quietAt < uint64(len(q.entries)):
			// A few keys came back within the hold: hold again.
			q.quietAt = q.handouts
			q.hold()
			return
		}
		q.keptUntil = 0 // as many hand-outs as entries since: decide anew
	}
	if q.handouts-q.quietAt < uint64(len(q.entries)) {
		return
	}
	q.quietAt = q.handouts
	reused := q.reused
	q.reused = 0
	// Bursts that come back (adds took idle entries up again, or the last
	// release dropped about as many entries as have been made again since)
	// keep their entries for quietHold: a burst back within it finds them,
	// and shows, as reuse, whether its keys are the same. A controller
	// woken by waves of the same keys then keeps its entries instead of
	// making them anew each wave, and one that has settled lets go.
	if 2*reused >= len(q.entries) {
		q.hold()
		return
	}
	if q.released > 0 && 2*len(q.entries) >= q.released {
		q.released = 0
		q.hold()
		return
	}
	q.released = len(q.entries)
	q.release()
}

// hold keeps the entries of a quiet queue until quietHold has passed, and
// makes a blocked Get keep time for it. Called with the lock held.
func (q *Queue[K]) hold() {
	q.keptUntil = max(q.now()+int64(quietHold), 1)
	q.wakeKeeper()
}

// release drops every entry, the slabs and the free list. Called with the
// lock held, on a quiet queue.
func (q *Queue[K]) release() {
	var kept map[K]*entry[K]
	for k, e := range q.entries {
		// Every entry is idle. Evicting one makes refs to it stale, so adds
		// and Dones without the lock that still hold one take the lock and
		// find the key gone. An entry that fails to be evicted was made
		// pending by such an add just now: it is on the pending stack and
		// stays.
		if e.evict() {
			continue
		}
		if kept == nil {
			kept = make(map[K]*entry[K])
		}
		e.idleListed = false
		e.idlePrev, e.idleNext = nil, nil
		kept[k] = e
	}
	if kept == nil {
		kept = make(map[K]*entry[K])
	}
	q.entries = kept
	q.idle = idleList[K]{}
	q.freeEnt = nil
	q.slab, q.slabbed = nil, 0
	q.snap.Store(nil)
	q.misses, q.evicted = 0, 0
}

// park pushes an entry that Done made idle without the lock onto the parked
// stack, unless it is on it already (from an earlier Done; Get then finds it
// idle or not, as it is by then).
func (q *Queue[K]) park(e *entry[K]) {
	if !e.parked.CompareAndSwap(false, true) {
		return
	}
	push(&q.parked, e, &e.parkedNext)
}

// listParked moves the parked stack's entries that are still idle onto the
// idle list. Called with the lock held.
func (q *Queue[K]) listParked() {
	for e := q.parked.Swap(nil); e != nil; {
		next := e.parkedNext
		e.parkedNext = nil
		e.parked.Store(false)
		if e.state() == 0 && !e.idleListed {
			q.listIdle(e)
		}
		e = next
	}
}

// unlistIdle takes an idle entry off the idle list before it is used again.
func (q *Queue[K]) unlistIdle(e *entry[K]) {
	if e.idleListed {
		q.idle.remove(e)
		e.idleListed = false
	}
}

// listIdle puts an idle entry on the idle list, and evicts up to two entries
// that have been idle too long (so eviction keeps pace with idling and costs
// a constant per call). Only listed entries are evicted.
func (q *Queue[K]) listIdle(e *entry[K]) {
	e.idleAt = q.handouts
	e.idleListed = true
	q.idle.pushBack(e)
	window := uint64(max(minIdleWindow, idleWindowFactor*len(q.entries)))
	for range 2 {
		old := q.idle.head
		if old == nil || q.handouts-old.idleAt <= window {
			break
		}
		q.idle.remove(old)
		old.idleListed = false
		if !old.evict() {
			continue // made pending meanwhile; the pending stack has it
		}
		delete(q.entries, old.key)
		var zero K
		old.key = zero // release what the key refers to
		old.idleNext = q.freeEnt
		q.freeEnt = old
		q.evicted++
	}
	if q.evicted > 16 && q.evicted > len(q.entries) {
		q.publish() // drop evicted keys from the snapshot
	}
}

// tryPend is the add without the lock: if r names an idle entry, it claims
// the entry (idle to pending) and pushes it on the pending stack, where the
// next lock holder finds it (see drainPending). Its ready time is read now,
// at the add, though the entry enters the ready structure, and gets its
// place among equals, only when drained. It reports whether it added; if
// not, the caller takes the lock. A named queue counts the add in its
// metrics here, at priority 0 (an add at another priority takes the lock),
// so that its depth never waits for a drain: workers busy for long may not
// take the lock for as long.
func (q *Queue[K]) tryPend(r ref[K], p int64) bool {
	e := r.e
	v := e.vs.Load()
	if uint32(v>>vsIncShift) != r.inc || uint8(v) != 0 || q.shut.Load() || q.m != nil && p != 0 {
		return false
	}
	t := q.preStamp()
	if t == unstamped && p != 0 {
		// The first priority other than 0 stamps every ready key as of
		// the moment it becomes ready; that moment must be this add's, so
		// it takes the lock.
		return false
	}
	if !e.vs.CompareAndSwap(v, nextVS(v, stPending)) {
		return false
	}
	e.maxPrio(p)
	e.pendAt = t
	if q.m != nil {
		q.m.adds.Inc()
		q.m.depth0.Inc()
	}
	push(&q.pending, e, &e.pendNext)
	// A blocked Get must learn of the entry. Blocked Gets list themselves
	// before they look at the pending stack, and a woken Get counts as
	// pending until it has drained the stack, so either one of them sees
	// the entry or this add sees them here. While a woken Get is pending
	// it drains the stack when it runs and wakes the next Get if keys are
	// left (chainWake), so nobody needs to be woken now.
	if q.shut.Load() || q.waiters.n.Load() != 0 && q.wakePending.Load() == 0 {
		q.mu.Lock()
		q.drainPending()
		if q.shuttingDown {
			q.shutdownProgress()
		}
		q.mu.Unlock()
	}
	return true
}

// drainPending moves the pending stack's entries into the ready structure
// (or hands one to a blocked Get), in the order their adds pushed them. After
// shutdown they are dropped instead: their adds raced with ShutDown, which
// drained everything pushed before it. Called with the lock held.
func (q *Queue[K]) drainPending() {
	top := q.pending.Swap(nil)
	if top == nil {
		if q.raised.Load() != nil {
			q.applyRaises()
		}
		return
	}
	var head *entry[K]
	for e := top; e != nil; {
		next := e.pendNext
		e.pendNext = head
		head = e
		e = next
	}
	for e := head; e != nil; {
		next := e.pendNext
		e.pendNext = nil
		q.unlistIdle(e)
		if q.shuttingDown {
			if q.m != nil {
				q.m.depth0.Dec() // counted as it was pushed
			}
			e.setPrio(noPriority)
			e.setState(0)
			q.listIdle(e)
		} else {
			q.reused++
			if p := e.prio(); q.m != nil && p != 0 { // raised by an add under the lock since
				q.m.depth0.Dec()
				q.m.depth(p).Inc()
			}
			q.ready(e, q.stampAt(e.pendAt))
		}
		e = next
	}
	if q.raised.Load() != nil {
		q.applyRaises()
	}
}

// tryRaise is the raise without the lock: if r names a ready entry, it holds
// the entry in state ready|raising while it merges priority p, and the order
// p gives at the time of this add, into the entry's raise, then marks the
// raise (ready|raised) and pushes the entry on the raised stack unless it is
// there. The next lock holder applies it (see applyRaises) before it looks at
// the ready keys, with the same result as a raise under the lock at the time
// of this add. It reports whether it did; if not, the caller takes the lock.
func (q *Queue[K]) tryRaise(r ref[K], p int64) bool {
	if !q.stamp.Load() {
		return false // the first priority switches the queue to stamping
	}
	e := r.e
	v := e.vs.Load()
	if uint32(v>>vsIncShift) != r.inc || q.shut.Load() {
		return false
	}
	s := uint8(v)
	if s != stReady && s != stReady|stRaised {
		return false
	}
	o := q.aged(q.elapsed(), p)
	held := nextVS(v, s|stRaising)
	if !e.vs.CompareAndSwap(v, held) {
		return false
	}
	if s == stReady { // no raise waiting: start one
		e.raiseP.Store(p)
		e.raiseOrd.Store(o)
	} else {
		if p > e.raiseP.Load() {
			e.raiseP.Store(p)
		}
		if o < e.raiseOrd.Load() {
			e.raiseOrd.Store(o)
		}
	}
	if !e.vs.CompareAndSwap(held, nextVS(held, stReady|stRaised)) {
		panic("workqueue: raising entry changed under its add")
	}
	// A lock holder resets raiseQueued before it looks at the state, so
	// either it sees this raise or this add pushes the entry again.
	if e.raiseQueued.CompareAndSwap(false, true) {
		push(&q.raised, e, &e.raiseNext)
	}
	return true
}

// applyRaises applies the raises waiting in the raised stack's entries that
// are still ready. Called with the lock held.
func (q *Queue[K]) applyRaises() {
	for e := q.raised.Swap(nil); e != nil; {
		next := e.raiseNext
		e.raiseNext = nil
		e.raiseQueued.Store(false)
		v := e.vs.Load()
		if uint8(v) == stReady|stRaised {
			p, o := e.raiseP.Load(), e.raiseOrd.Load()
			// Fails if an add is merging another raise in; it pushes the
			// entry again when done, as raiseQueued is now false.
			if e.vs.CompareAndSwap(v, nextVS(v, stReady)) {
				q.applyRaise(e, p, o)
			}
		}
		e = next
	}
}

// push puts e on the lock-free stack whose top is head, linking it through
// next (one of e's link fields, each stack its own). Whoever swaps the stack
// empty owns the entries on it.
func push[K comparable](head *atomic.Pointer[entry[K]], e *entry[K], next **entry[K]) {
	for {
		top := head.Load()
		*next = top
		if head.CompareAndSwap(top, e) {
			return
		}
	}
}
