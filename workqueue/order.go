package workqueue

// makeReady makes an entry that is in no structure ready at time t (now, or
// unstamped), with the priority it has. It is reserved for a blocked Get if
// there is one and no woken Get is pending; then nothing else is ready (a
// woken Get, once it runs, reserves the next ready key for the next blocked
// Get, under the same lock), so order is kept. Otherwise it goes into the
// ready structure.
func (q *Queue[K]) makeReady(e *entry[K], t int64) {
	if q.m != nil {
		q.m.adds.Inc()
		q.m.depth(e.prio()).Inc()
	}
	q.ready(e, t)
}

// ready is makeReady for an entry whose add the metrics have counted
// (an add without the lock counts it as it pushes the entry, see tryPend).
func (q *Queue[K]) ready(e *entry[K], t int64) {
	q.seq++
	e.seq = q.seq
	if !q.stamp.Load() {
		t = unstamped // keep the ring uniform until the first stamp
	}
	e.readySince = t
	p := e.prio()
	if q.wakePending.Load() == 0 {
		if w := q.pickWaiter(); w != nil {
			q.reserve(e, p, w)
			return
		}
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

// applyRaise applies a raise made without the lock: priority p, and order o
// (what raise computes from p and the time of that add).
func (q *Queue[K]) applyRaise(e *entry[K], p int64, o int64) {
	if p <= e.prio() {
		return // nothing a raise under the lock would have changed either
	}
	if q.m != nil {
		q.m.depth(e.prio()).Dec()
		q.m.depth(p).Inc()
	}
	e.setPrio(p)
	if !q.prioMode {
		q.enterPrioMode()
	}
	if o < e.order {
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

// reserve hands an entry that is out of the ready structure, ready at
// priority p, to the blocked Get w and wakes it.
func (q *Queue[K]) reserve(e *entry[K], p int64, w *waiter[K]) {
	q.handOut(e, p)
	e.setState(stReserved) // the waiter makes it inFlight when it runs
	q.wakePending.Add(1)
	q.wake(w, e)
}

// chainWake is called by a Get woken with a reserved key once it runs: if
// keys are still ready and Gets blocked, it reserves the next key for the
// next Get.
func (q *Queue[K]) chainWake() {
	if q.wakePending.Load() != 0 || q.waiters.tail == nil {
		return
	}
	if w := q.pickWaiter(); w != nil {
		if e := q.popReady(); e != nil {
			q.reserve(e, e.prio(), w)
		}
	}
}

// handOut moves an entry that is out of the ready structure, and was ready
// at priority p, to in flight.
func (q *Queue[K]) handOut(e *entry[K], p int64) {
	if q.m != nil {
		q.startMetrics(e, p)
	}
	e.takeReady(stInFlight)
	e.setPrio(noPriority)
	q.inFlight.Add(1)
	q.handouts++
}
