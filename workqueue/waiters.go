package workqueue

import (
	"math"
	"time"
)

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
// the queue sees it due: a timer fired, or Get or Status ran).
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

// wake unlists w and sends its token, handing it e (reserved for it) or nil:
// look at the queue again.
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
	if q.keeper == nil && q.timed() && q.waiters.tail != nil {
		q.wake(q.waiters.tail, nil)
	}
}

// timed reports whether the queue waits for a time: a delay, or the end of
// a quiet spell's hold on its entries (keptUntil) still to come. A hold
// that has passed while the queue was busy is not waited for: the next
// quiet spell decides.
func (q *Queue[K]) timed() bool {
	return q.delays.len() > 0 || q.keptUntil != 0 && q.keptUntil > q.now()
}

// nextTime is the earliest time the queue waits for; timed must be true.
func (q *Queue[K]) nextTime() int64 {
	t := int64(math.MaxInt64)
	if q.delays.len() > 0 {
		t = q.delays.first().readyAt
	}
	if q.keptUntil != 0 && q.keptUntil > q.now() {
		t = min(t, q.keptUntil)
	}
	return t
}

func (q *Queue[K]) newWaiter() *waiter[K] { return q.waiterPool.Get().(*waiter[K]) }

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
