package sharding

import (
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/lease"
	"github.com/kloop-dev/kloop/internal/slots"
)

const (
	tSlots    = 8
	tDuration = 15 * time.Second
	tDeadline = 10 * time.Second
)

// tTiming is the timing of the cores' own Leases.
var tTiming = lease.Timing{LeaseDuration: tDuration, RenewDeadline: tDeadline, RetryPeriod: 2 * time.Second}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// rec is what c's Lease would say, at resourceVersion rv.
func rec(c *core, rv string) record {
	return record{Identity: c.self, Slots: c.n, Key: c.key, Held: c.held(), Draining: c.inState(slotReleasing), Duration: tDuration, RV: rv}
}

// joined returns a member that has written its Lease at now.
func joined(id string, now time.Time) *core {
	c := newCore(id, tSlots, ByNamespace, tTiming)
	c.wrote(now)
	return c
}

// takeAll runs c's claim round at now with no one else around.
func takeAll(t *testing.T, c *core, now time.Time) {
	t.Helper()
	p := c.next(now)
	c.set(now, p.claim, slotClaiming)
	start, _ := c.confirm(now)
	c.set(now, start, slotActive)
	if c.scope().Len() == 0 {
		t.Fatalf("%s took nothing", c.self)
	}
}

func TestCore_AloneTakesEverySlot(t *testing.T) {
	c := newCore("a", tSlots, ByNamespace, tTiming)
	if p := c.next(at(0)); p.claim.Len() != 0 {
		t.Fatalf("claimed %s before its Lease was written", p.claim)
	}
	c.wrote(at(0))
	p := c.next(at(0))
	if p.claim.Len() != tSlots {
		t.Fatalf("claim %s, want every slot", p.claim)
	}
	c.set(at(0), p.claim, slotClaiming)
	if c.held().Len() != tSlots || c.scope().Len() != 0 {
		t.Fatalf("claiming: held %s, scope %s; a claim is held but not started", c.held(), c.scope())
	}
	start, _ := c.confirm(at(0.1))
	if start.Len() != tSlots || c.scope().Len() != tSlots {
		t.Fatalf("confirm started %s", start)
	}
}

// B joins A: A gives up B's share, and B starts each slot only once A's
// Lease no longer lists it.
func TestCore_HandoverWaitsForTheReleasingMember(t *testing.T) {
	a := joined("a", at(0))
	takeAll(t, a, at(0))
	b := joined("b", at(1))
	b.observe(at(1), []record{rec(a, "1")})
	if p := b.next(at(1)); p.claim.Len() != 0 {
		t.Fatalf("b claims %s while a's live Lease holds every slot", p.claim)
	}
	a.observe(at(1), []record{rec(b, "2")})
	pa := a.next(at(1))
	if pa.release.Len() == 0 || pa.release.Len() == tSlots {
		t.Fatalf("a releases %s; want b's share", pa.release)
	}
	a.set(at(1), pa.release, slotReleasing)
	if a.scope().Intersect(pa.release).Len() != 0 || !a.held().Equal(slots.Full(tSlots)) {
		t.Fatalf("releasing: scope %s, held %s; the slots leave scope at once but stay held", a.scope(), a.held())
	}
	// a's Lease says draining: b still waits.
	b.observe(at(2), []record{rec(a, "3")})
	if p := b.next(at(2)); p.claim.Len() != 0 {
		t.Fatalf("b claims %s while a drains them", p.claim)
	}
	a.set(at(3), pa.release, slotFree)
	b.observe(at(3), []record{rec(a, "4")})
	pb := b.next(at(3))
	if !pb.claim.Equal(pa.release) {
		t.Fatalf("b claims %s, want what a released: %s", pb.claim, pa.release)
	}
	b.set(at(3), pb.claim, slotClaiming)
	start, waited := b.confirm(at(3.1))
	if !start.Equal(pa.release) {
		t.Fatalf("b starts %s", start)
	}
	for _, w := range waited {
		if w != 2100*time.Millisecond {
			t.Errorf("handover wait %v, want 2.1s (from first assigned to started)", w)
		}
	}
	if a.scope().Intersect(b.scope()).Len() != 0 || a.scope().Union(b.scope()).Len() != tSlots {
		t.Errorf("scopes a %s, b %s: want a partition", a.scope(), b.scope())
	}
}

// Two members that each think a slot free and theirs both claim it; the
// confirming read shows each the other's claim, and neither starts it.
func TestCore_ConcurrentClaimsBackOff(t *testing.T) {
	a := joined("a", at(0))
	b := joined("b", at(0))
	pa, pb := a.next(at(0)), b.next(at(0)) // neither knows the other yet
	a.set(at(0), pa.claim, slotClaiming)
	b.set(at(0), pb.claim, slotClaiming)
	both := pa.claim.Intersect(pb.claim)
	if both.Len() == 0 {
		t.Fatal("no overlap between the claims; the test needs one")
	}
	a.observe(at(0.1), []record{rec(b, "1")})
	b.observe(at(0.1), []record{rec(a, "2")})
	sa, _ := a.confirm(at(0.1))
	sb, _ := b.confirm(at(0.1))
	if sa.Intersect(sb).Len() != 0 {
		t.Fatalf("both started %s", sa.Intersect(sb))
	}
	if a.held().Len() != 0 || b.held().Len() != 0 {
		t.Fatalf("after backing off a holds %s, b %s", a.held(), b.held())
	}
	// Next round they agree on the assignment and split the slots.
	a.observe(at(1), []record{rec(b, "3")})
	b.observe(at(1), []record{rec(a, "4")})
	pa, pb = a.next(at(1)), b.next(at(1))
	if pa.claim.Intersect(pb.claim).Len() != 0 || pa.claim.Union(pb.claim).Len() != tSlots {
		t.Fatalf("second round: a claims %s, b %s", pa.claim, pb.claim)
	}
}

// When only one of two concurrent claimers sees the other (the later
// reader), the earlier one starts and the later backs off.
func TestCore_TheLaterReaderOfAConcurrentClaimBacksOff(t *testing.T) {
	a := joined("a", at(0))
	b := joined("b", at(0))
	pa, pb := a.next(at(0)), b.next(at(0))
	a.set(at(0), pa.claim, slotClaiming)
	b.set(at(0), pb.claim, slotClaiming)
	sa, _ := a.confirm(at(0.1)) // read before b wrote
	b.observe(at(0.2), []record{rec(a, "1")})
	sb, _ := b.confirm(at(0.2))
	if sa.Len() != tSlots || sb.Len() != 0 {
		t.Fatalf("a started %s, b %s", sa, sb)
	}
}

// A member whose Lease stops changing is gone after its duration, on the
// observer's clock, and its slots are taken then, not before.
func TestCore_TakesTheSlotsOfAnExpiredMember(t *testing.T) {
	a := joined("a", at(0))
	b := joined("b", at(0))
	a.observe(at(0), []record{rec(b, "1")})
	b.observe(at(0), []record{rec(a, "2")})
	for _, c := range []*core{a, b} {
		p := c.next(at(0))
		c.set(at(0), p.claim, slotClaiming)
		s, _ := c.confirm(at(0))
		c.set(at(0), s, slotActive)
	}
	bHeld := b.held()
	// b dies after its last renewal, seen by a at 5s.
	b.wrote(at(5))
	a.observe(at(5), []record{rec(b, "3")})
	a.wrote(at(19))
	p := a.next(at(19.9))
	if p.claim.Len() != 0 {
		t.Fatalf("a claims %s before b's Lease expired", p.claim)
	}
	if want := at(20); !p.wake.Equal(want) {
		t.Errorf("wake at %v, want b's expiry %v", p.wake, want)
	}
	p = a.next(at(20))
	if !p.claim.Equal(bHeld) {
		t.Fatalf("at expiry a claims %s, want b's %s", p.claim, bHeld)
	}
}

// A Lease's expiry counts from when its change arrived, not from when the
// member got round to looking at it.
func TestCore_ExpiryCountsFromWhenTheChangeArrived(t *testing.T) {
	a := joined("a", at(0))
	b := joined("b", at(0))
	takeAll(t, b, at(0))
	r := rec(b, "1")
	r.Seen = at(1)
	a.observe(at(3), []record{r})
	a.wrote(at(16))
	if p := a.next(at(16)); p.claim.Len() != tSlots {
		t.Fatalf("at 16s, 15s after b's Lease arrived, a claims %s", p.claim)
	}
}

func TestCore_ALostLeaseReleasesEverything(t *testing.T) {
	a := joined("a", at(0))
	takeAll(t, a, at(0))
	if p := a.next(at(9.9)); p.release.Len() != 0 {
		t.Fatalf("released %s before the renew deadline", p.release)
	}
	p := a.next(at(10))
	if p.release.Len() != tSlots {
		t.Fatalf("lost: release %s, want everything", p.release)
	}
	if len(a.members(at(10))) != 0 {
		t.Error("a still counts itself a member after losing its Lease")
	}
	a.set(at(10), p.release, slotReleasing)
	a.set(at(11), p.release, slotFree)
	a.wrote(at(12))
	if p := a.next(at(12)); p.claim.Len() != tSlots {
		t.Fatalf("renewed again: claims %s", p.claim)
	}
}

func TestCore_AMemberWithAnotherConfigurationBlocksClaims(t *testing.T) {
	a := joined("a", at(0))
	other := record{Identity: "z", Slots: 16, Key: ByNamespace, Held: slots.New(16), Draining: slots.New(16), Duration: tDuration, RV: "1"}
	a.observe(at(0), []record{other})
	if p := a.next(at(0)); p.claim.Len() != 0 || !a.blocked(at(0)) {
		t.Fatalf("claims %s next to a member with 16 slots", p.claim)
	}
	a.wrote(at(15))
	if p := a.next(at(15)); p.claim.Len() != tSlots {
		t.Fatalf("after it expired: claims %s", p.claim)
	}
}

func TestCore_LeavingReleasesAndClaimsNothing(t *testing.T) {
	a := joined("a", at(0))
	takeAll(t, a, at(0))
	a.leaving = true
	p := a.next(at(1))
	if p.release.Len() != tSlots || p.claim.Len() != 0 {
		t.Fatalf("leaving: release %s, claim %s", p.release, p.claim)
	}
}

func TestCore_AGoneLeaseIsForgotten(t *testing.T) {
	a := joined("a", at(0))
	b := joined("b", at(0))
	takeAll(t, b, at(0))
	a.observe(at(0), []record{rec(b, "1")})
	if p := a.next(at(1)); p.claim.Len() != 0 {
		t.Fatalf("claims %s b holds", p.claim)
	}
	a.observe(at(2), nil) // b deleted its Lease when it left
	if p := a.next(at(2)); p.claim.Len() != tSlots {
		t.Fatalf("after b's Lease went: claims %s", p.claim)
	}
}

// The first live member deletes a Lease left unchanged for staleAfter
// durations; the others leave it.
func TestCore_TheFirstMemberCollectsLeasesLeftBehind(t *testing.T) {
	a := joined("a", at(0))
	b := joined("b", at(0))
	dead := record{Identity: "c", Name: "g-c", Slots: tSlots, Held: slots.New(tSlots, 1), Draining: slots.New(tSlots), Duration: tDuration, RV: "9"}
	a.observe(at(0), []record{dead, rec(b, "1")})
	b.observe(at(0), []record{dead, rec(a, "2")})
	a.wrote(at(59))
	b.wrote(at(59))
	a.observe(at(59), []record{dead, rec(b, "3")})
	b.observe(at(59), []record{dead, rec(a, "4")})
	if got := a.stale(at(59)); len(got) != 0 {
		t.Fatalf("stale before 4 durations: %v", got)
	}
	if got := a.stale(at(60)); len(got) != 1 || got[0].Name != "g-c" {
		t.Fatalf("a collects %v, want c's Lease", got)
	}
	if got := b.stale(at(60)); len(got) != 0 {
		t.Fatalf("b collects %v; only the first member does", got)
	}
}

// A member that just joined waits a moment before it claims, so that
// replicas started together do not all start with everything.
func TestCore_AJoiningMemberWaitsBeforeItsFirstClaim(t *testing.T) {
	c := newCore("a", tSlots, ByNamespace, tTiming)
	c.joinDelay = 2 * time.Second
	c.wrote(at(0))
	p := c.next(at(1))
	if p.claim.Len() != 0 || !p.wake.Equal(at(2)) {
		t.Fatalf("at 1s: claims %s, wakes at %v; want nothing until 2s", p.claim, p.wake)
	}
	if p := c.next(at(2)); p.claim.Len() != tSlots {
		t.Fatalf("at 2s: claims %s", p.claim)
	}
	c.wrote(at(3)) // later renewals do not move the moment
	if !c.claimFrom.Equal(at(2)) {
		t.Errorf("claimFrom moved to %v", c.claimFrom)
	}
}
