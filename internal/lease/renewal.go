package lease

import "time"

// Renewal is the one renew mechanism of a Lease of one's own, for leader
// election and for sharding: when the next write is due, how long a write
// may take, and when the Lease is lost. It is pure: no I/O, no clock and
// no goroutines; every input carries its time. The loop that owns the
// Lease's Held (an elector's run, a shard member's event loop) feeds it
// the outcome of each write and asks it when to write and wake next, so
// both renew on one cadence and give up on one deadline.
//
// The cadence: writes start RetryPeriod apart, whether the last one
// succeeded or failed, as Timing declares (and as client-go's elector
// retries). A loop may write sooner (a shard member writes at once when
// its slots change); that write counts as the last one.
//
// The deadline: the Lease is lost once RenewDeadline has passed since the
// start of the last successful write. The start, not the answer: nobody
// can have seen the write any earlier, so counting from it errs on the
// safe side. A Renewal with no successful write yet is not lost.
type Renewal struct {
	timing  Timing
	renewed time.Time // start of the last successful write; zero: none yet
	next    time.Time // when the next write is due; zero: at once
}

// NewRenewal returns the Renewal of a Lease timed by t (as WithDefaults
// returned it), with no write yet: the first one is due at once.
func NewRenewal(t Timing) Renewal { return Renewal{timing: t} }

// Renewed records that a write which started at start succeeded. The
// next write is due RetryPeriod after start.
func (r *Renewal) Renewed(start time.Time) {
	r.renewed = start
	r.next = start.Add(r.timing.RetryPeriod)
}

// Failed records that a write which started at start failed. The next
// write is due RetryPeriod after start (at once if it took that long);
// the deadline stays where the last success put it.
func (r *Renewal) Failed(start time.Time) {
	r.next = start.Add(r.timing.RetryPeriod)
}

// Last returns the start of the last successful write, zero before the
// first.
func (r *Renewal) Last() time.Time { return r.renewed }

// Due reports whether a write is due at now.
func (r *Renewal) Due(now time.Time) bool { return !now.Before(r.next) }

// Lost reports whether RenewDeadline has passed at now since the start of
// the last successful write. It is false before the first one.
func (r *Renewal) Lost(now time.Time) bool {
	return !r.renewed.IsZero() && !now.Before(r.deadline())
}

// Bound returns how long a write that starts at now may take: the time
// left before the Lease is lost, so that a server that does not answer
// cannot keep the owner from giving the Lease up in time; RetryPeriod
// when there is no deadline to keep (no successful write yet, or lost).
func (r *Renewal) Bound(now time.Time) time.Duration {
	if !r.renewed.IsZero() {
		if left := r.deadline().Sub(now); left > 0 {
			return left
		}
	}
	return r.timing.RetryPeriod
}

// Wake returns when the owner must look again, at the latest: now if a
// write is due; else when the next one is, or, if it comes first and is
// still ahead, when the Lease would be lost.
func (r *Renewal) Wake(now time.Time) time.Time {
	if r.Due(now) {
		return now
	}
	if !r.renewed.IsZero() {
		if d := r.deadline(); d.After(now) && d.Before(r.next) {
			return d
		}
	}
	return r.next
}

func (r *Renewal) deadline() time.Time { return r.renewed.Add(r.timing.RenewDeadline) }
