package leaderelection

import (
	"errors"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kloop-dev/kloop/internal/lease"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// testCore is the core of candidate id with the given lease duration and
// renew deadline (these tests do not depend on the retry period).
func testCore(id string, leaseDuration, renewDeadline time.Duration) *core {
	return newCore(id, lease.Timing{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: time.Second})
}

// observation is one read of the lease: at which time, with which
// resourceVersion and record.
type observation struct {
	at  time.Duration
	rv  string
	rec record
}

func TestCore_NextDecidesFromObservedLeaseAndLocalTime(t *testing.T) {
	const lease = 15 * time.Second
	other := record{Holder: "b", LeaseDuration: lease, AcquireTime: at(-time.Hour), RenewTime: at(-time.Hour), Transitions: 4}
	mine := record{Holder: "a", LeaseDuration: lease, AcquireTime: at(-time.Minute), RenewTime: at(-time.Minute), Transitions: 2}
	tests := []struct {
		name     string
		seen     []observation
		exists   bool
		now      time.Duration
		wantAct  action
		wantRec  record
		checkRec bool
	}{
		{
			name: "no lease: create it as holder with no transitions",
			now:  0, exists: false,
			wantAct: actCreate, checkRec: true,
			wantRec: record{Holder: "a", LeaseDuration: lease, AcquireTime: at(0), RenewTime: at(0)},
		},
		{
			// The renewTime in the lease is an hour old, but expiry is
			// judged from when we saw it, on our clock.
			name: "held by another, just seen: wait even though its timestamps are old",
			seen: []observation{{0, "10", other}}, exists: true, now: time.Second,
			wantAct: actWait,
		},
		{
			name: "held by another, unchanged for just under its duration: wait",
			seen: []observation{{0, "10", other}}, exists: true, now: lease - time.Nanosecond,
			wantAct: actWait,
		},
		{
			name: "held by another, unchanged for its duration: take over, count a transition",
			seen: []observation{{0, "10", other}, {10 * time.Second, "10", other}}, exists: true, now: lease,
			wantAct: actUpdate, checkRec: true,
			wantRec: record{Holder: "a", LeaseDuration: lease, AcquireTime: at(lease), RenewTime: at(lease), Transitions: 5},
		},
		{
			name: "held by another that renewed (new resourceVersion): its expiry restarts",
			seen: []observation{{0, "10", other}, {10 * time.Second, "11", other}}, exists: true, now: lease + time.Second,
			wantAct: actWait,
		},
		{
			name: "the holder's own longer duration counts, not ours",
			seen: []observation{{0, "10", record{Holder: "b", LeaseDuration: time.Minute}}}, exists: true, now: 30 * time.Second,
			wantAct: actWait,
		},
		{
			name: "a lease without a duration is given ours",
			seen: []observation{{0, "10", record{Holder: "b"}}}, exists: true, now: lease - time.Second,
			wantAct: actWait,
		},
		{
			name: "released (no holder): take it at once",
			seen: []observation{{0, "10", record{LeaseDuration: time.Second, Transitions: 7}}}, exists: true, now: 0,
			wantAct: actUpdate, checkRec: true,
			wantRec: record{Holder: "a", LeaseDuration: lease, AcquireTime: at(0), RenewTime: at(0), Transitions: 8},
		},
		{
			name: "held by us: renew, keeping acquire time and transitions",
			seen: []observation{{0, "10", mine}}, exists: true, now: 3 * time.Second,
			wantAct: actUpdate, checkRec: true,
			wantRec: record{Holder: "a", LeaseDuration: lease, AcquireTime: at(-time.Minute), RenewTime: at(3 * time.Second), Transitions: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCore("a", lease, 10*time.Second)
			for _, o := range tt.seen {
				c.observe(at(o.at), o.rv, o.rec)
			}
			act, rec := c.next(at(tt.now), tt.exists)
			if act != tt.wantAct {
				t.Fatalf("next = %v, want %v", act, tt.wantAct)
			}
			if tt.checkRec && rec != tt.wantRec {
				t.Fatalf("next record = %+v\nwant %+v", rec, tt.wantRec)
			}
		})
	}
}

func TestCore_LeaderIsLostRenewDeadlineAfterStartOfLastSuccessfulRenewal(t *testing.T) {
	c := testCore("a", 15*time.Second, 10*time.Second)
	_, rec := c.next(at(0), false)
	// The create started at 0 and was answered at 1s: the deadline counts
	// from 0, the earliest anyone could have seen it.
	c.wrote(at(0), at(time.Second), "5", rec)
	if !c.leading {
		t.Fatal("not leading after writing the lease as holder")
	}
	if c.lost(at(10*time.Second - time.Nanosecond)) {
		t.Fatal("lost before RenewDeadline passed")
	}
	_, rec = c.next(at(4*time.Second), true)
	c.wrote(at(4*time.Second), at(6*time.Second), "6", rec)
	if c.lost(at(13 * time.Second)) {
		t.Fatal("lost 9s after a renewal that started at 4s")
	}
	if !c.lost(at(14 * time.Second)) {
		t.Fatal("still leading RenewDeadline after the start of the last renewal")
	}
	if c.leading || c.lost(at(20*time.Second)) {
		t.Fatal("lost must report once and leave the core not leading")
	}
}

func TestCore_ReleasedRecordHasNoHolderAndKeepsTransitions(t *testing.T) {
	c := testCore("a", 15*time.Second, 10*time.Second)
	c.observe(at(0), "3", record{Holder: "a", Transitions: 3})
	r := c.released(at(time.Second))
	if r.Holder != "" || r.Transitions != 3 || r.LeaseDuration != time.Second {
		t.Fatalf("released record %+v: want no holder, 3 transitions, 1s", r)
	}
}

func TestRecord_RoundTripsThroughLeaseSpecInWholeSeconds(t *testing.T) {
	in := record{Holder: "x", LeaseDuration: 1500 * time.Millisecond, AcquireTime: at(time.Microsecond), RenewTime: at(2 * time.Second), Transitions: 9}
	var l coordinationv1.Lease
	setRecord(&l, in)
	if *l.Spec.LeaseDurationSeconds != 2 {
		t.Fatalf("leaseDurationSeconds %d for 1.5s, want 2 (rounded up)", *l.Spec.LeaseDurationSeconds)
	}
	out := recordOf(&l)
	in.LeaseDuration = 2 * time.Second
	if !out.AcquireTime.Equal(in.AcquireTime) || !out.RenewTime.Equal(in.RenewTime) {
		t.Fatalf("times did not round-trip: %+v vs %+v", out, in)
	}
	out.AcquireTime, out.RenewTime, in.AcquireTime, in.RenewTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if out != in {
		t.Fatalf("recordOf(setRecord(r)) = %+v, want %+v", out, in)
	}
	if r := recordOf(&coordinationv1.Lease{}); r != (record{}) {
		t.Fatalf("empty lease reads as %+v, want the zero record", r)
	}
}

func TestConfig_ZeroDurationsTakeDefaultsAndBadOnesAreRejected(t *testing.T) {
	c, err := Options{Namespace: "ns", Name: "n"}.withDefaults()
	if err != nil {
		t.Fatalf("minimal config rejected: %v", err)
	}
	if c.LeaseDuration != 15*time.Second || c.RenewDeadline != 10*time.Second || c.RetryPeriod != 2*time.Second {
		t.Fatalf("defaults %v/%v/%v, want 15s/10s/2s", c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
	}
	if c.Identity == "" || c.Clock == nil || c.Logger == nil {
		t.Fatalf("identity %q, clock %v, logger %v: want all defaulted", c.Identity, c.Clock, c.Logger)
	}
	c2, _ := Options{Namespace: "ns", Name: "n"}.withDefaults()
	if c2.Identity == c.Identity {
		t.Fatalf("two default identities are equal (%q); candidates on one host would collide", c.Identity)
	}
	bad := []Options{
		{Name: "n"},
		{Namespace: "ns", Name: "n", RenewDeadline: 15 * time.Second},
		{Namespace: "ns", Name: "n", RetryPeriod: 10 * time.Second},
		{Namespace: "ns", Name: "n", LeaseDuration: -time.Second},
	}
	for i, b := range bad {
		if _, err := b.withDefaults(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("config %d (%+v): got %v, want ErrInvalidConfig", i, b, err)
		}
	}
}

func TestCore_ObserveReportsAChangeOnlyForANewResourceVersion(t *testing.T) {
	c := testCore("a", 15*time.Second, 10*time.Second)
	other := record{Holder: "b", LeaseDuration: 4 * time.Second}
	if !c.observe(at(0), "1", other) {
		t.Fatal("first sight of a lease not reported as a change")
	}
	if c.observe(at(time.Second), "1", other) {
		t.Fatal("the same resourceVersion reported as a change")
	}
	if exp, _ := c.expiry(); !exp.Equal(at(4 * time.Second)) {
		t.Fatalf("expiry %v after an unchanged read, want 4s after the first sight", exp.Sub(t0))
	}
	if !c.observe(at(2*time.Second), "2", other) {
		t.Fatal("a new resourceVersion not reported as a change")
	}
	if exp, _ := c.expiry(); !exp.Equal(at(6 * time.Second)) {
		t.Fatalf("expiry %v after a change at 2s, want 6s", exp.Sub(t0))
	}
}

func TestCore_NextAttemptIsOnePeriodLaterButNoLaterThanTheLeaseExpires(t *testing.T) {
	const (
		lease  = 4 * time.Second
		period = 500 * time.Millisecond
	)
	tests := []struct {
		name  string
		seen  []observation
		start time.Duration
		want  time.Duration
	}{
		{name: "nothing seen: one period after the start", start: time.Second, want: 1500 * time.Millisecond},
		{
			name: "held by another, far from expiry: one period after the start",
			seen: []observation{{0, "1", record{Holder: "b", LeaseDuration: lease}}}, start: time.Second, want: 1500 * time.Millisecond,
		},
		{
			name: "held by another, expiring within the period: at the expiry, not after",
			seen: []observation{{0, "1", record{Holder: "b", LeaseDuration: lease}}}, start: 3800 * time.Millisecond, want: lease,
		},
		{
			name:  "expiry counts from the last change seen, not the last read",
			seen:  []observation{{0, "1", record{Holder: "b", LeaseDuration: lease}}, {3 * time.Second, "1", record{Holder: "b", LeaseDuration: lease}}},
			start: 3700 * time.Millisecond, want: lease,
		},
		{
			name: "a lease without a duration expires after ours",
			seen: []observation{{0, "1", record{Holder: "b"}}}, start: 3700 * time.Millisecond, want: lease,
		},
		{
			name: "released: one period after the start",
			seen: []observation{{0, "1", record{LeaseDuration: time.Second}}}, start: 3800 * time.Millisecond, want: 4300 * time.Millisecond,
		},
		{
			name: "ours: one period after the start",
			seen: []observation{{0, "1", record{Holder: "a", LeaseDuration: lease}}}, start: 3800 * time.Millisecond, want: 4300 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCore("a", lease, 3*time.Second)
			for _, o := range tt.seen {
				c.observe(at(o.at), o.rv, o.rec)
			}
			if got := c.nextAttempt(at(tt.start), period); !got.Equal(at(tt.want)) {
				t.Fatalf("nextAttempt = %v, want %v", got.Sub(t0), tt.want)
			}
		})
	}
}

// TestCore_StandbyTakesOverWithinLeaseDurationPlusPeriodOfTheLastRenewal
// drives a standby's core by its own schedule against a holder that renews
// every period and stops at many different moments, with instant requests:
// the takeover comes no sooner than LeaseDuration and no later than
// LeaseDuration + period after the holder's last renewal, whatever the
// phase of the two schedules and the standby's (downward) jitter.
func TestCore_StandbyTakesOverWithinLeaseDurationPlusPeriodOfTheLastRenewal(t *testing.T) {
	const (
		lease  = 4 * time.Second
		period = 500 * time.Millisecond
		step   = 7 * time.Millisecond // phases of the holder's schedule against the standby's
	)
	jitters := []float64{1, 0.8, 0.93}
	for phase := time.Duration(0); phase < period; phase += step {
		for stopAfter := 1; stopAfter <= 12; stopAfter++ {
			jit := jitters[(stopAfter+int(phase/step))%len(jitters)]
			// The holder renews at phase, phase+period, ...; its last
			// renewal is number stopAfter.
			lastRenewal := phase + time.Duration(stopAfter)*period
			rvAt := func(now time.Duration) string { // the lease's resourceVersion at now
				n := 0
				for r := phase; r <= now && r <= lastRenewal; r += period {
					n++
				}
				return strconv.Itoa(n)
			}
			c := testCore("a", lease, 3*time.Second)
			now := time.Duration(0)
			var took time.Duration
			for i := 0; ; i++ {
				if i > 1000 {
					t.Fatalf("phase %v, stop after %d: no takeover in 1000 attempts", phase, stopAfter)
				}
				// An attempt: a write when the lease as last seen is
				// expired (it succeeds if unchanged, as the precondition
				// would have it), else a read.
				if c.seen && !c.heldByOther(at(now)) {
					if c.rv == rvAt(now) {
						took = now - lastRenewal
						break
					}
				}
				c.observe(at(now), rvAt(now), record{Holder: "b", LeaseDuration: lease})
				if !c.heldByOther(at(now)) {
					took = now - lastRenewal
					break
				}
				next := c.nextAttempt(at(now), time.Duration(float64(period)*jit)).Sub(t0)
				if next <= now {
					t.Fatalf("phase %v, stop after %d: next attempt at %v, not after %v", phase, stopAfter, next, now)
				}
				now = next
			}
			if took < lease || took > lease+period {
				t.Fatalf("phase %v, stop after %d, jitter %v: took over %v after the last renewal, want within [%v, %v]",
					phase, stopAfter, jit, took, lease, lease+period)
			}
		}
	}
}
