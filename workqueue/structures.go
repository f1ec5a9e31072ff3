package workqueue

import (
	"math"
	"runtime"
	"sync/atomic"

	"k8s.io/utils/clock"
)

// Entry states. An entry stays in the entries map while idle too, so that a
// key that comes back (the common case for a controller) costs no allocation
// and no map insert; idle entries are evicted once they have been idle for a
// while (see Queue.listIdle). Legal states: idle (0); ready; waiting;
// reserved; pending; inFlight; inFlight|dirty; inFlight|waiting; evicted.
// An idle entry's priority is noPriority, so that whoever makes it ready
// can raise it with maxPrio.
const (
	stReady    uint8 = 1 << iota // in the ring or the ready heap
	stWaiting                    // in the delay heap
	stInFlight                   // handed out by Get, Done not called yet
	stDirty                      // added while in flight; ready again at Done
	stEvicted                    // no longer in the entries map
	// stReserved: handed to a blocked Get whose goroutine has not run yet.
	// It counts as in flight, but adds are merged into it as into a ready
	// key. Only that goroutine changes the state, to inFlight, without the
	// lock; no one else writes a reserved entry's state.
	stReserved
	// stPending: made ready by an Add that did not take the lock (see
	// Queue.tryPend); on the pending stack until a lock holder moves it
	// into the ready structure. Only lock holders change a pending entry's
	// state or raise its priority.
	stPending
	// stRaised, with stReady: a raise made without the lock waits in the
	// entry's raiseP and raiseOrd for a lock holder to apply it.
	stRaised
	// stRaising, with stReady (and maybe stRaised): an add without the lock
	// is writing a raise. A lock holder that hands the entry out waits for
	// it to finish (a few instructions). The dirty bit serves, as a ready
	// entry is never dirty.
	stRaising = stDirty
)

// noPriority marks an entry whose next hand-out has no requested priority yet,
// so that the first add sets it and later adds can only raise it.
const noPriority = math.MinInt64

// entry is the queue's record of one key. Entries are carved from slabs and
// recycled, never freed one by one, so that keys coming and going do not
// allocate. Every field is guarded by the queue's lock, except that vs and pr
// are atomics so that Add can see, without the lock, that a key is already
// going to be handed out (see covers).
type entry[K comparable] struct {
	key K // set when the entry is (re)used; zeroed when evicted

	// vs packs the entry's incarnation (bits 40-63, bumped each time the
	// entry is reused for a key), a version (bits 8-39, bumped on every
	// state change) and the state (bits 0-7).
	vs atomic.Uint64
	// pr is the highest priority requested since the key was last handed
	// out (noPriority while in flight and not added again). It only falls
	// together with a state change.
	pr atomic.Int64

	// order is the ready heap's sort key: the time the entry became ready
	// minus its priority in aging steps, so older entries overtake higher
	// priorities in a bounded time. seq breaks ties in FIFO order.
	order int64
	seq   uint64

	readyAt int64  // delay heap key, nanoseconds since the queue's epoch
	dseq    uint64 // delay heap tie-breaker

	hidx int32 // index in the ready heap
	didx int32 // index in the delay heap

	// Idle list (or free list) links, and the hand-out count when the entry
	// went idle. idleListed says whether it is on the idle list: a Done
	// without the lock leaves the entry idle but unlisted, on the parked
	// stack (parkedNext, parked) until the next Get lists it.
	idlePrev, idleNext *entry[K]
	idleAt             uint64
	idleListed         bool
	parkedNext         *entry[K]
	parked             atomic.Bool

	// Pending stack link, and the clock reading (see Queue.preStamp) of the
	// add that made the entry pending. Written by that add before it pushes
	// the entry, read by the lock holder that pops it.
	pendNext *entry[K]
	pendAt   int64

	// A raise of a ready entry made without the lock (see Queue.tryRaise):
	// the highest priority and lowest order asked for. Written only by the
	// add that holds the entry in state ready|raising; valid while the
	// state is ready|raised. raiseQueued says whether the entry is on the
	// raised stack (raiseNext).
	raiseP      atomic.Int64
	raiseOrd    atomic.Int64
	raiseQueued atomic.Bool
	raiseNext   *entry[K]

	// When the entry last became ready, and (only kept for metrics) when it
	// was last handed out; nanoseconds since the queue's epoch.
	readySince int64
	startedAt  int64
}

const (
	vsStateMask   = 0xff
	vsVersionOne  = 1 << 8
	vsVersionMask = (1<<32 - 1) << 8
	vsIncShift    = 40
)

func (e *entry[K]) state() uint8 { return uint8(e.vs.Load()) }

func (e *entry[K]) setState(s uint8) { e.vs.Store(nextVS(e.vs.Load(), s)) }

// nextVS is vs with the version bumped and the state set to s.
func nextVS(v uint64, s uint8) uint64 {
	ver := (v + vsVersionOne) & vsVersionMask
	return v&^(vsVersionMask|vsStateMask) | ver | uint64(s)
}

// casState moves the entry from exactly state from to state to, and reports
// whether it did. Lock holders use it on entries in state inFlight, which
// Done may make idle without the lock at the same time.
func (e *entry[K]) casState(from, to uint8) bool {
	v := e.vs.Load()
	return uint8(v) == from && e.vs.CompareAndSwap(v, nextVS(v, to))
}

// incarnation tells apart the keys an entry has served.
func (e *entry[K]) incarnation() uint32 { return uint32(e.vs.Load() >> vsIncShift) }

// reincarnate gives the entry a new incarnation in state s, which makes
// every ref to the previous one stale.
func (e *entry[K]) reincarnate(s uint8) { e.vs.Store(reincarnated(e.vs.Load(), s)) }

// evict gives an idle entry a new incarnation in state evicted, and reports
// whether it did: an add without the lock may have made it pending.
func (e *entry[K]) evict() bool {
	v := e.vs.Load()
	return uint8(v) == 0 && e.vs.CompareAndSwap(v, reincarnated(v, stEvicted))
}

// takeReady moves an entry out of a ready state (or any state without
// stRaising that no one else may change) to s, first waiting for an add that
// is writing a raise to finish. Called with the lock held.
func (e *entry[K]) takeReady(s uint8) {
	for i := 0; ; i++ {
		v := e.vs.Load()
		if uint8(v)&stReady == 0 || uint8(v)&stRaising == 0 {
			if e.vs.CompareAndSwap(v, nextVS(v, s)) {
				return
			}
			continue
		}
		if i >= 16 {
			runtime.Gosched() // the raising add was preempted
		}
	}
}

func reincarnated(v uint64, s uint8) uint64 {
	inc := (v>>vsIncShift + 1) << vsIncShift
	return inc | (v+vsVersionOne)&vsVersionMask | uint64(s)
}

func (e *entry[K]) prio() int64 { return e.pr.Load() }

func (e *entry[K]) setPrio(p int64) { e.pr.Store(p) }

// maxPrio raises the entry's priority to p if p is higher.
func (e *entry[K]) maxPrio(p int64) {
	for {
		cur := e.pr.Load()
		if cur >= p || e.pr.CompareAndSwap(cur, p) {
			return
		}
	}
}

// ref is an entry as the lock-free snapshot knows it: valid only while the
// entry is still in that incarnation.
type ref[K comparable] struct {
	e   *entry[K]
	inc uint32
}

// covers reports, without the queue's lock, whether adding the key now at
// priority p would change nothing: r still names the key's entry, which is
// reserved for a Get, or ready or pending, or in flight and added again, with at least
// priority p. State and priority are read between two reads of the version,
// so they held together at one instant.
func (r ref[K]) covers(p int64) bool {
	v := r.e.vs.Load()
	if uint32(v>>vsIncShift) != r.inc {
		return false
	}
	switch uint8(v) {
	case stReserved:
		return true // about to be handed out, whatever the priority
	case stReady | stRaised:
		if r.e.raiseP.Load() >= p {
			return r.e.vs.Load() == v
		}
		fallthrough
	case stReady, stPending, stInFlight | stDirty:
		return r.e.pr.Load() >= p && r.e.vs.Load() == v
	}
	return false
}

// shrinker decides when a buffer should give memory back: after it has
// stayed less than 1/8 full for many removals in a row. A queue that fills
// and drains over and over keeps its buffers instead of reallocating them each
// time, and one that shrank for good returns the memory of its peak.
type shrinker struct{ low int }

func (s *shrinker) due(n, c int) bool {
	if c <= 1024 || n >= c/8 {
		s.low = 0
		return false
	}
	if s.low++; s.low > 4*c {
		s.low = 0
		return true
	}
	return false
}

// ring is a FIFO of entries on a power-of-two circular buffer. It is the
// ready structure while every ready entry has priority 0.
type ring[K comparable] struct {
	buf    []*entry[K]
	head   int
	n      int
	shrink shrinker
}

func (r *ring[K]) push(e *entry[K]) {
	if r.n == len(r.buf) {
		r.resize(max(16, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
}

func (r *ring[K]) pop() *entry[K] {
	if r.n == 0 {
		return nil
	}
	e := r.buf[r.head]
	r.buf[r.head] = nil // do not pin handed-out entries
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if r.shrink.due(r.n, len(r.buf)) {
		r.resize(len(r.buf) / 2)
	}
	return e
}

func (r *ring[K]) resize(size int) {
	buf := make([]*entry[K], size)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
}

// readyHeap orders entries by (order, seq): a 4-ary min-heap that keeps the
// sort keys next to the entry pointers, so sifting compares without chasing
// pointers, and each entry's position in hidx, so that raising a priority is
// O(log n). A 4-ary heap is half as deep as a binary one, and a node's
// children share cache lines.
type readyHeap[K comparable] struct {
	s      []heapSlot[K]
	shrink shrinker
}

type heapSlot[K comparable] struct {
	order int64
	seq   uint64
	e     *entry[K]
}

func (a *heapSlot[K]) less(b *heapSlot[K]) bool {
	return a.order < b.order || a.order == b.order && a.seq < b.seq
}

func (h *readyHeap[K]) len() int { return len(h.s) }

// appendSorted adds an entry known to sort after every entry in the heap.
func (h *readyHeap[K]) appendSorted(e *entry[K]) {
	e.hidx = int32(len(h.s))
	h.s = append(h.s, heapSlot[K]{e.order, e.seq, e})
}

func (h *readyHeap[K]) push(e *entry[K]) {
	h.appendSorted(e)
	h.up(int(e.hidx))
}

// fix restores the heap after e's order decreased.
func (h *readyHeap[K]) fix(e *entry[K]) {
	h.s[e.hidx].order = e.order
	h.up(int(e.hidx))
}

func (h *readyHeap[K]) pop() *entry[K] {
	s := h.s
	n := len(s) - 1
	e := s[0].e
	s[0] = s[n]
	s[0].e.hidx = 0
	s[n] = heapSlot[K]{}
	h.s = s[:n]
	if n > 0 {
		h.down(0)
	}
	e.hidx = -1
	if h.shrink.due(len(h.s), cap(h.s)) {
		h.s = append(make([]heapSlot[K], 0, cap(h.s)/2), h.s...)
	}
	return e
}

func (h *readyHeap[K]) up(i int) {
	s := h.s
	x := s[i]
	for i > 0 {
		p := (i - 1) / 4
		if !x.less(&s[p]) {
			break
		}
		s[i] = s[p]
		s[i].e.hidx = int32(i)
		i = p
	}
	s[i] = x
	x.e.hidx = int32(i)
}

func (h *readyHeap[K]) down(i int) {
	s := h.s
	n := len(s)
	x := s[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if s[j].less(&s[m]) {
				m = j
			}
		}
		if !s[m].less(&x) {
			break
		}
		s[i] = s[m]
		s[i].e.hidx = int32(i)
		i = m
	}
	s[i] = x
	x.e.hidx = int32(i)
}

// delayHeap orders waiting entries by (readyAt, dseq), position in didx.
type delayHeap[K comparable] struct {
	s      []*entry[K]
	shrink shrinker
}

func delayLess[K comparable](a, b *entry[K]) bool {
	if a.readyAt != b.readyAt {
		return a.readyAt < b.readyAt
	}
	return a.dseq < b.dseq
}

func (h *delayHeap[K]) len() int { return len(h.s) }

// first is the earliest waiting entry; the heap must not be empty.
func (h *delayHeap[K]) first() *entry[K] { return h.s[0] }

func (h *delayHeap[K]) push(e *entry[K]) {
	e.didx = int32(len(h.s))
	h.s = append(h.s, e)
	h.up(int(e.didx))
}

func (h *delayHeap[K]) remove(e *entry[K]) {
	s := h.s
	i := int(e.didx)
	n := len(s) - 1
	if i != n {
		s[i] = s[n]
		s[i].didx = int32(i)
	}
	s[n] = nil
	h.s = s[:n]
	if i != n {
		h.down(i)
		h.up(i)
	}
	e.didx = -1
	if h.shrink.due(len(h.s), cap(h.s)) {
		h.s = append(make([]*entry[K], 0, cap(h.s)/2), h.s...)
	}
}

func (h *delayHeap[K]) up(i int) {
	s := h.s
	e := s[i]
	for i > 0 {
		p := (i - 1) / 2
		if !delayLess(e, s[p]) {
			break
		}
		s[i] = s[p]
		s[i].didx = int32(i)
		i = p
	}
	s[i] = e
	e.didx = int32(i)
}

func (h *delayHeap[K]) down(i int) {
	s := h.s
	n := len(s)
	e := s[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && delayLess(s[r], s[c]) {
			c = r
		}
		if !delayLess(s[c], e) {
			break
		}
		s[i] = s[c]
		s[i].didx = int32(i)
		i = c
	}
	s[i] = e
	e.didx = int32(i)
}

// waiter is a goroutine blocked in Get. Whoever removes a waiter from the
// list sends exactly one token on ch, after setting e if it hands over an
// entry; a token with e == nil asks the waiter to look at the queue again.
type waiter[K comparable] struct {
	ch         chan struct{}
	e          *entry[K] // reserved for this waiter, set before the token
	prev, next *waiter[K]
	listed     bool
	keeping    bool        // this waiter is the time keeper
	timer      clock.Timer // created the first time this waiter keeps time
}

// waiterList is an intrusive doubly-linked list of blocked Get calls.
type waiterList[K comparable] struct {
	head, tail *waiter[K]
	n          atomic.Int32 // read without the lock by adds that do not take it
}

func (l *waiterList[K]) pushBack(w *waiter[K]) {
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	w.listed = true
	l.n.Add(1)
}

func (l *waiterList[K]) remove(w *waiter[K]) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	w.listed = false
	l.n.Add(-1)
}

// idleList is an intrusive FIFO of idle entries, oldest first.
type idleList[K comparable] struct {
	head, tail *entry[K]
}

func (l *idleList[K]) pushBack(e *entry[K]) {
	e.idlePrev, e.idleNext = l.tail, nil
	if l.tail != nil {
		l.tail.idleNext = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *idleList[K]) remove(e *entry[K]) {
	if e.idlePrev != nil {
		e.idlePrev.idleNext = e.idleNext
	} else {
		l.head = e.idleNext
	}
	if e.idleNext != nil {
		e.idleNext.idlePrev = e.idlePrev
	} else {
		l.tail = e.idlePrev
	}
	e.idlePrev, e.idleNext = nil, nil
}
