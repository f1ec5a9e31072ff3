package sharding

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"
)

// Status is what a member knows of its group, for the shard table on
// /readyz?verbose and for tests.
type Status struct {
	Group    string
	Identity string
	Slots    int
	Key      Key
	// Joined: this member's Lease is written and renewed in time.
	Joined bool
	// Blocked: a live member runs with another slot count or key, so this
	// one claims nothing.
	Blocked bool
	// Leaving: the member is stopping and giving its slots up.
	Leaving bool
	// Settled: no handover in progress here: this member works on exactly
	// the slots the live members' assignment gives it, its caches hold
	// their objects, and nothing is being claimed or released.
	Settled bool
	// Scope: the slots whose objects this replica caches: those it works
	// on, and those it is starting (whose caches are filling), in
	// increasing order.
	Scope []int
	// Active: the slots whose keys this replica reconciles now, in
	// increasing order.
	Active []int
	// Members: every known member, this one first.
	Members []MemberStatus
	// Informers: the sharded informers and how they are filtered.
	Informers []InformerStatus
}

// MemberStatus is one row of the shard table.
type MemberStatus struct {
	Identity string
	// Self marks this replica.
	Self bool
	// Live: its Lease changed within its duration (for Self: renewed
	// within the renew deadline).
	Live bool
	// Held: slots its Lease lists (working on, or handing over), in
	// increasing order.
	Held []int
	// Draining: the held slots it is giving up, in increasing order.
	Draining []int
	// Assigned: how many slots the live members' assignment gives it.
	Assigned int
	// Age: time since its Lease was last seen to change.
	Age time.Duration
}

// InformerStatus describes one sharded informer.
type InformerStatus struct {
	Name    string
	Objects int
	// Filtering is "server" when the API server applied the shard
	// selector (the last LIST echoed it in ShardInfo, or, for custom
	// resources, whose lists carry none, the last snapshot held nothing
	// outside the shard), "client" when the informer receives objects of
	// other shards and drops them itself, "none" while this replica holds
	// every slot, and "unknown" before a snapshot told.
	Filtering string
}

// Status returns the member's latest state.
func (m *Member) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// StatusChanged returns a channel that is closed when the status is next
// updated (which happens whenever the member acts or sees a Lease change,
// and at every renewal): wait on it, then read Status again.
func (m *Member) StatusChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusCh
}

// String renders the shard table:
//
//	shard group foo: 64 slots by namespace, this member foo-a (31 in scope)
//	MEMBER   LIVE  ASSIGNED  HELD        DRAINING  SEEN
//	foo-a *  yes   21        0-5,9,…     -         0.4s
//	...
//	INFORMER             OBJECTS  FILTERING
//	foos.v1alpha1.… [all namespaces]  203  server
func (s Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shard group %s: %d slots by %s, this member %s (%d in scope)", s.Group, s.Slots, s.Key, s.Identity, len(s.Scope))
	switch {
	case s.Leaving:
		b.WriteString(", leaving")
	case !s.Joined:
		b.WriteString(", not joined")
	case s.Blocked:
		b.WriteString(", blocked by a member with another configuration")
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tLIVE\tASSIGNED\tHELD\tDRAINING\tSEEN")
	for _, m := range s.Members {
		id := m.Identity
		if m.Self {
			id += " *"
		}
		live := "no"
		if m.Live {
			live = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s ago\n", id, live, m.Assigned, orDash(s.Slots, m.Held), orDash(s.Slots, m.Draining), m.Age.Round(100*time.Millisecond))
	}
	if len(s.Informers) > 0 {
		fmt.Fprintln(tw, "INFORMER\tOBJECTS\tFILTERING")
		for _, i := range s.Informers {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", i.Name, i.Objects, i.Filtering)
		}
	}
	tw.Flush()
	return b.String()
}

func orDash(n int, s []int) string {
	if len(s) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d: %s", len(s), slots.New(n, s...).String())
}
