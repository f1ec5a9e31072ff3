package workqueue

import (
	"time"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// Status is a queue's state at one moment, for people and dashboards: how
// much waits, for how long, and how much flows through.
type Status struct {
	// Name is Options.Name.
	Name string
	// Ready keys wait to be handed out, by priority in ReadyByPriority.
	// Keys whose delay has passed count as ready.
	Ready           int
	ReadyByPriority map[int]int
	// Delayed keys wait for their delay (AddAfter, AddRateLimited).
	Delayed int
	// InFlight keys have been handed out and are not Done.
	InFlight int
	// OldestReady is how long the key that has been ready longest has
	// waited. It is 0 when nothing is ready, and for an unnamed queue that
	// has only ever held priority-0 keys (such a queue reads no clock).
	OldestReady time.Duration
	// LongestRunning is how long the oldest key in flight has been out
	// (named queues only: the workqueue_longest_running_processor_seconds
	// gauge).
	LongestRunning time.Duration
	// Adds and Retries are the workqueue_adds_total and
	// workqueue_retries_total counters (named queues only).
	Adds, Retries uint64
	ShuttingDown  bool
}

// Status reports the queue's state. It takes the queue's lock once, for a
// time that grows with the number of ready keys when they have mixed
// priorities (each is looked at), so call it when someone asks, not in a
// loop. It may be called from any goroutine.
func (q *Queue[K]) Status() Status {
	q.mu.Lock()
	q.drainPending()
	now := q.now()
	if q.delays.len() > 0 {
		q.promote(now)
	}
	s := Status{
		Ready:        q.ring.n + q.prio.len(),
		Delayed:      q.delays.len(),
		InFlight:     int(q.inFlight.Load()),
		ShuttingDown: q.shuttingDown,
	}
	oldest := int64(unstamped)
	if s.Ready > 0 {
		s.ReadyByPriority = make(map[int]int)
	}
	if q.ring.n > 0 {
		s.ReadyByPriority[0] = q.ring.n
		oldest = q.ring.buf[q.ring.head].readySince
	}
	if q.prio.len() > 0 {
		for i := range q.prio.s {
			e := q.prio.s[i].e
			s.ReadyByPriority[int(e.prio())]++
			if oldest == unstamped || e.readySince < oldest {
				oldest = e.readySince
			}
		}
	}
	if oldest != unstamped {
		s.OldestReady = time.Duration(now - oldest)
	}
	if q.m != nil {
		q.eachInFlight(func(startedAt int64) {
			s.LongestRunning = max(s.LongestRunning, time.Duration(now-startedAt))
		})
	}
	m := q.m
	q.mu.Unlock()
	if m != nil {
		s.Name = m.name
		s.Adds, s.Retries = kmetrics.Count(m.adds), kmetrics.Count(m.retries)
	}
	return s
}
