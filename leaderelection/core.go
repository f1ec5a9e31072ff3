package leaderelection

import (
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/internal/lease"
)

// record is what a Lease says about leadership.
type record struct {
	Holder        string // "" when nobody holds the lease
	LeaseDuration time.Duration
	AcquireTime   time.Time
	RenewTime     time.Time
	Transitions   int32
}

// action is what the elector should do with the lease next.
type action uint8

const (
	actWait   action = iota + 1 // another candidate holds a valid lease
	actCreate                   // no lease exists: create it
	actUpdate                   // take the lease over, or renew it
)

func (a action) String() string {
	switch a {
	case actWait:
		return "wait"
	case actCreate:
		return "create"
	case actUpdate:
		return "update"
	}
	return "action(?)"
}

// core decides acquire and renew from observations and times it is given.
// It does no I/O, reads no clock and starts no goroutines; the elector's Run
// feeds it.
//
// Expiry is judged on this process's clock only: a lease held by another is
// valid until its LeaseDuration has passed since the moment this process
// last saw it change (its resourceVersion), never by the timestamps written
// in it. Those were read from another machine's clock, which may be set
// minutes apart from ours; the change of resourceVersion is the only thing
// the two processes agree on. What does matter is the rate at which clocks
// run: if ours ran faster than the holder's by more than the ratio of
// LeaseDuration to RenewDeadline, we could count a lease out that its holder
// still believes it holds (see the package documentation on fencing).
//
// The moment of a change is when the read that showed it was answered, the
// latest the change can have happened. Taking the start of the request
// instead would let a renewal that started after it, and so a holder that
// stops leading later, slip inside the LeaseDuration we wait.
type core struct {
	id            string
	leaseDuration time.Duration // ours, written into the lease

	seen       bool      // a lease has been observed
	rv         string    // its resourceVersion when last observed
	rec        record    // what it said
	observedAt time.Time // when rv last changed, on our clock

	leading bool
	// renewal schedules renewals and says when leadership is lost; it
	// counts from the start of our last successful acquire or renew
	// request.
	renewal lease.Renewal
}

// newCore returns the core of candidate id, timed by t.
func newCore(id string, t lease.Timing) *core {
	return &core{id: id, leaseDuration: t.LeaseDuration, renewal: lease.NewRenewal(t)}
}

// observe records the lease as read at now, and reports whether it changed:
// a lease seen for the first time or with a new resourceVersion restarts
// its expiry clock.
func (c *core) observe(now time.Time, rv string, rec record) bool {
	changed := !c.seen || rv != c.rv
	if changed {
		c.observedAt = now
	}
	c.seen, c.rv, c.rec = true, rv, rec
	return changed
}

// expiry returns when the lease as last observed expires on our clock, and
// false when it is not held by another (absent, released or ours).
func (c *core) expiry() (time.Time, bool) {
	if !c.seen || c.rec.Holder == "" || c.rec.Holder == c.id {
		return time.Time{}, false
	}
	d := c.rec.LeaseDuration
	if d <= 0 {
		d = c.leaseDuration // a lease without a duration: assume ours
	}
	return c.observedAt.Add(d), true
}

// heldByOther reports whether another candidate holds a lease that has not
// expired at now.
func (c *core) heldByOther(now time.Time) bool {
	exp, ok := c.expiry()
	return ok && now.Before(exp)
}

// nextAttempt returns when a candidate that is not leading tries again,
// after an attempt that started at start: one period later (the shell
// passes RetryPeriod, shortened by its jitter, never lengthened), but no
// later than the moment the lease held by another expires. So a standby
// reads the lease at least every RetryPeriod, and sees the holder's last
// renewal at most RetryPeriod (plus one read) after it was made; and it
// acquires at the expiry itself, not at the first attempt after it. That
// puts a takeover within LeaseDuration + RetryPeriod of the holder's last
// renewal, plus the latency of two requests. The attempt at expiry is
// never early: expiry counts LeaseDuration from the last change seen.
func (c *core) nextAttempt(start time.Time, period time.Duration) time.Time {
	next := start.Add(period)
	if exp, ok := c.expiry(); ok && exp.Before(next) {
		next = exp
	}
	return next
}

// next decides, at now, what to write given whether the lease exists (as
// last observed), and returns the record to write for actCreate and
// actUpdate.
func (c *core) next(now time.Time, exists bool) (action, record) {
	if !exists {
		return actCreate, record{Holder: c.id, LeaseDuration: c.leaseDuration, AcquireTime: now, RenewTime: now}
	}
	if c.heldByOther(now) {
		return actWait, record{}
	}
	if c.rec.Holder == c.id {
		// A renewal (or a restart under the same identity): the term goes on.
		r := c.rec
		r.LeaseDuration, r.RenewTime = c.leaseDuration, now
		if r.AcquireTime.IsZero() {
			r.AcquireTime = now
		}
		return actUpdate, r
	}
	return actUpdate, record{
		Holder: c.id, LeaseDuration: c.leaseDuration, AcquireTime: now, RenewTime: now,
		Transitions: c.rec.Transitions + 1,
	}
}

// wrote records that our write of rec, whose request started at start,
// succeeded at now and left the lease at rv. We lead from now on, and the
// renewal deadline counts from start (lease.Renewal: another candidate
// cannot have seen the write any earlier).
func (c *core) wrote(start, now time.Time, rv string, rec record) {
	c.observe(now, rv, rec)
	c.leading = rec.Holder == c.id
	if c.leading {
		c.renewal.Renewed(start)
	}
}

// lost reports whether a leader has gone RenewDeadline without a successful
// renewal at now, and if so stops leading.
func (c *core) lost(now time.Time) bool {
	if c.leading && c.renewal.Lost(now) {
		c.leading = false
		return true
	}
	return false
}

// released returns the record that gives the lease up: no holder, and a
// duration of one second so that candidates that still read the old holder
// wait little.
func (c *core) released(now time.Time) record {
	return record{LeaseDuration: time.Second, AcquireTime: now, RenewTime: now, Transitions: c.rec.Transitions}
}

// recordOf reads a Lease.
func recordOf(l *coordinationv1.Lease) record {
	s := l.Spec
	r := record{Holder: ptr.Deref(s.HolderIdentity, ""), Transitions: ptr.Deref(s.LeaseTransitions, 0)}
	if s.LeaseDurationSeconds != nil {
		r.LeaseDuration = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	if s.AcquireTime != nil {
		r.AcquireTime = s.AcquireTime.Time
	}
	if s.RenewTime != nil {
		r.RenewTime = s.RenewTime.Time
	}
	return r
}

// setRecord writes r into l's spec, leaving fields it does not model (such
// as a coordinated-election strategy) alone.
func setRecord(l *coordinationv1.Lease, r record) {
	l.Spec.HolderIdentity = ptr.To(r.Holder)
	secs := math.Ceil(r.LeaseDuration.Seconds())
	l.Spec.LeaseDurationSeconds = ptr.To(int32(max(1, min(secs, math.MaxInt32))))
	l.Spec.AcquireTime = &metav1.MicroTime{Time: r.AcquireTime}
	l.Spec.RenewTime = &metav1.MicroTime{Time: r.RenewTime}
	l.Spec.LeaseTransitions = ptr.To(r.Transitions)
}
