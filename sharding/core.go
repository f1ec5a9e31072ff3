package sharding

import (
	"slices"
	"time"

	"github.com/kloop-dev/kloop/internal/lease"
	"github.com/kloop-dev/kloop/internal/slots"
)

// This file is the member's pure core: what it knows of the group's Leases
// and of its own slots, and the decisions that follow, with no I/O, no
// goroutines and no clock (every input carries the time it happened).
// member.go is the shell that writes the Lease, watches the others, and
// carries the decisions out on controllers and informers.
//
// The protocol, for slot s and replicas A (holding s) and B (to whom the
// live members now assign s):
//
//   - A stops handing out keys of s, waits for its reconciles of s in
//     flight, drops the objects of s from its caches, then writes its Lease
//     without s (state releasing → free).
//   - B claims s only while no live Lease other than its own lists s: it
//     writes its Lease with s, then reads every Lease of the group afresh
//     (a consistent LIST) and starts s only if still no other live Lease
//     lists it (claiming → starting → active). Two replicas that claim one
//     slot at once cannot both miss the other's claim: the later reader sees
//     the earlier writer. Either backs off when it sees the other.
//   - A Lease is live while it keeps changing: a member counts another as
//     gone once it has not seen its Lease change for that Lease's duration,
//     on its own clock (never the times written in the Lease). A member that
//     cannot renew its own Lease for RenewDeadline stops everything it holds.

type slotState uint8

const (
	slotFree      slotState = iota
	slotClaiming            // listed in our Lease, not yet confirmed; not started
	slotStarting            // confirmed: in scope, caches filling
	slotActive              // in scope, caches filled
	slotReleasing           // out of scope, draining; still listed in our Lease
)

var slotStateNames = [...]string{"free", "claiming", "starting", "active", "releasing"}

func (s slotState) String() string { return slotStateNames[s] }

// record is what one member's Lease says.
type record struct {
	Identity string
	Slots    int // the group's number of slots, as that member has it
	Key      Key
	Held     slots.Set // slots it may be working on: claiming, starting, active or releasing
	Draining slots.Set // the subset it is releasing
	Duration time.Duration
	RV       string // the Lease's resourceVersion: a change means it was renewed
	// Seen is when this member first saw the Lease at RV; zero means at
	// the time it is observed.
	Seen time.Time
	Name string // the Lease's name
}

type peer struct {
	rec        record
	observedAt time.Time // when this member last saw rec change
}

type core struct {
	self string
	n    int
	key  Key

	peers map[string]*peer
	state []slotState
	since []time.Time // when each slot entered its state
	want  []time.Time // when a free slot was first seen assigned to us (zero if not)

	// renewal schedules the writes of our Lease and says when it is lost;
	// it counts from the start of the last successful write.
	renewal lease.Renewal
	// claimFrom: a member claims free slots only from then on, a moment
	// after its Lease first appeared, so that replicas started together
	// see each other before the first of them takes everything.
	claimFrom time.Time
	joinDelay time.Duration
	leaving   bool // shutting down: release everything, claim nothing
}

// newCore returns the core of member self of a group of n slots keyed by
// key, whose own Lease is timed by t.
func newCore(self string, n int, key Key, t lease.Timing) *core {
	return &core{
		self:    self,
		n:       n,
		key:     key,
		renewal: lease.NewRenewal(t),
		peers:   make(map[string]*peer),
		state:   make([]slotState, n),
		since:   make([]time.Time, n),
		want:    make([]time.Time, n),
	}
}

// observe takes the Leases of the group as they are now (our own among
// them or not). A Lease seen for the first time, or with a new
// resourceVersion, counts as renewed now; a Lease no longer there is gone.
func (c *core) observe(now time.Time, recs []record) {
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		if r.Identity == c.self || r.Identity == "" {
			continue
		}
		seen[r.Identity] = true
		at := r.Seen
		if at.IsZero() || at.After(now) {
			at = now
		}
		p, ok := c.peers[r.Identity]
		if !ok {
			c.peers[r.Identity] = &peer{rec: r, observedAt: at}
			continue
		}
		if p.rec.RV != r.RV {
			p.rec, p.observedAt = r, at
		}
	}
	for id := range c.peers {
		if !seen[id] {
			delete(c.peers, id)
		}
	}
}

func (p *peer) live(now time.Time) bool { return now.Before(p.observedAt.Add(p.rec.Duration)) }

func (c *core) compatible(p *peer) bool { return p.rec.Slots == c.n && p.rec.Key == c.key }

// staleAfter is how many of its own durations a Lease must have gone
// unchanged before it is deleted as left behind (by a replica that was
// killed, and will not come back under that identity).
const staleAfter = 4

// stale lists the peers whose Leases this member should delete: those
// unchanged for staleAfter durations, if this member is the first live one
// by identity (so that one member does it).
func (c *core) stale(now time.Time) []record {
	ms := c.members(now)
	if len(ms) == 0 || ms[0] != c.self {
		return nil
	}
	var out []record
	for _, p := range c.peers {
		if !now.Before(p.observedAt.Add(staleAfter * p.rec.Duration)) {
			out = append(out, p.rec)
		}
	}
	return out
}

// joined reports whether our Lease has been written (renewed in time or
// not: see lost).
func (c *core) joined() bool { return !c.renewal.Last().IsZero() }

// lost reports whether our Lease has gone unrenewed past the renew
// deadline.
func (c *core) lost(now time.Time) bool { return c.renewal.Lost(now) }

// wrote records a successful write of our Lease that started at start.
func (c *core) wrote(start time.Time) {
	if c.claimFrom.IsZero() {
		c.claimFrom = start.Add(c.joinDelay)
	}
	c.renewal.Renewed(start)
}

// members lists the live compatible members, ourselves included while our
// Lease is current.
func (c *core) members(now time.Time) []string {
	var ms []string
	if c.joined() && !c.lost(now) {
		ms = append(ms, c.self)
	}
	for id, p := range c.peers {
		if p.live(now) && c.compatible(p) {
			ms = append(ms, id)
		}
	}
	slices.Sort(ms)
	return ms
}

// blocked reports whether a live member runs with another slot count or
// key: their slot numbers mean other hash ranges, so nothing can be claimed
// safely until it is gone.
func (c *core) blocked(now time.Time) bool {
	for _, p := range c.peers {
		if p.live(now) && !c.compatible(p) {
			return true
		}
	}
	return false
}

// heldByOthers is every slot a live member's Lease lists.
func (c *core) heldByOthers(now time.Time) slots.Set {
	s := slots.New(c.n)
	for _, p := range c.peers {
		if p.live(now) && c.compatible(p) {
			s = s.Union(p.rec.Held)
		}
	}
	return s
}

func (c *core) inState(states ...slotState) slots.Set {
	s := slots.New(c.n)
	for i, st := range c.state {
		if slices.Contains(states, st) {
			s.Add(i)
		}
	}
	return s
}

// held is what our Lease must list: every slot we may be working on.
func (c *core) held() slots.Set {
	return c.inState(slotClaiming, slotStarting, slotActive, slotReleasing)
}

// scope is the slots whose keys we hand out and whose objects we cache.
func (c *core) scope() slots.Set { return c.inState(slotStarting, slotActive) }

func (c *core) set(now time.Time, s slots.Set, to slotState) {
	for _, i := range s.Slots() {
		c.state[i], c.since[i] = to, now
	}
}

// plan is what the member should do next.
type plan struct {
	release slots.Set // starting or active slots to drain now
	claim   slots.Set // free slots to claim: write them into our Lease, then confirm
	wake    time.Time // evaluate again by then (a peer's Lease expires); zero if nothing is due
}

// next decides, at now, which slots to release and which to claim.
func (c *core) next(now time.Time) plan {
	p := plan{release: slots.New(c.n), claim: slots.New(c.n)}
	for _, peer := range c.peers {
		if exp := peer.observedAt.Add(peer.rec.Duration); exp.After(now) && (p.wake.IsZero() || exp.Before(p.wake)) {
			p.wake = exp
		}
	}
	if c.lost(now) || c.leaving {
		// Everything stops; claims that were never started are simply dropped.
		p.release = c.scope()
		for _, i := range c.inState(slotClaiming).Slots() {
			c.state[i], c.since[i] = slotFree, now
		}
		return p
	}
	if !c.joined() {
		return p
	}
	owners := slots.Assign(c.members(now), c.n)
	others := c.heldByOthers(now)
	blocked := c.blocked(now) || now.Before(c.claimFrom)
	if now.Before(c.claimFrom) && (p.wake.IsZero() || c.claimFrom.Before(p.wake)) {
		p.wake = c.claimFrom
	}
	for i, st := range c.state {
		mine := owners[i] == c.self
		switch st {
		case slotStarting, slotActive:
			if !mine {
				p.release.Add(i)
			}
		case slotFree:
			if !mine {
				c.want[i] = time.Time{}
				continue
			}
			if c.want[i].IsZero() {
				c.want[i] = now
			}
			if !others.Has(i) && !blocked {
				p.claim.Add(i)
			}
		}
	}
	return p
}

// confirm settles our claims after a fresh read of every Lease (observe it
// first): a claimed slot that no other live Lease lists and that is still
// ours starts; the others are given up. It returns the slots to start and
// how long each had waited since it was first assigned to us.
func (c *core) confirm(now time.Time) (start slots.Set, waited []time.Duration) {
	start = slots.New(c.n)
	if c.lost(now) || !c.joined() || c.leaving {
		for _, i := range c.inState(slotClaiming).Slots() {
			c.state[i], c.since[i] = slotFree, now
		}
		return start, nil
	}
	owners := slots.Assign(c.members(now), c.n)
	others := c.heldByOthers(now)
	blocked := c.blocked(now)
	for _, i := range c.inState(slotClaiming).Slots() {
		if owners[i] != c.self || others.Has(i) || blocked {
			c.state[i], c.since[i] = slotFree, now
			continue
		}
		c.state[i], c.since[i] = slotStarting, now
		start.Add(i)
		if !c.want[i].IsZero() {
			waited = append(waited, now.Sub(c.want[i]))
		}
		c.want[i] = time.Time{}
	}
	return start, waited
}

// view describes every known member at now, ourselves first.
func (c *core) view(now time.Time) []MemberStatus {
	owners := slots.Assign(c.members(now), c.n)
	count := func(id string) int { return slots.Owned(owners, id).Len() }
	rows := []MemberStatus{{
		Identity: c.self,
		Self:     true,
		Live:     c.joined() && !c.lost(now),
		Held:     c.held().Slots(),
		Draining: c.inState(slotReleasing).Slots(),
		Assigned: count(c.self),
		Age:      now.Sub(c.renewal.Last()),
	}}
	ids := make([]string, 0, len(c.peers))
	for id := range c.peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := c.peers[id]
		rows = append(rows, MemberStatus{
			Identity: id,
			Live:     p.live(now),
			Held:     p.rec.Held.Slots(),
			Draining: p.rec.Draining.Slots(),
			Assigned: count(id),
			Age:      now.Sub(p.observedAt),
		})
	}
	return rows
}
