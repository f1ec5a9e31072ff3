package workqueue

import "math"

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

// park pushes an entry that Done made idle without the lock onto the parked
// stack, unless it is on it already (from an earlier Done; Get then finds it
// idle or not, as it is by then).
func (q *Queue[K]) park(e *entry[K]) {
	if !e.parked.CompareAndSwap(false, true) {
		return
	}
	for {
		top := q.parked.Load()
		e.parkedNext = top
		if q.parked.CompareAndSwap(top, e) {
			return
		}
	}
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
