package controller

import (
	"fmt"
	"testing"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/ownwrite"
)

// The triggers a causeSet leaves out for its bounds are still weighed: a
// key woken by many of its own writes is skipped, but one trigger of
// another's among them, kept or not, makes it reconcile.
func TestPendingCauses_TriggersLeftOutForTheBoundsStillDecideTheSkip(t *testing.T) {
	c := &Controller[string]{}
	c.causes.own = c.self.took
	child := func(i int, rv string) Cause {
		return Cause{Source: "Owns", Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p%d", i), ResourceVersion: rv, Change: cache.Updated}
	}
	// The watch events of the writes can come before the writes are
	// recorded: the triggers left out are matched when the key is taken.
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	wrote := func() {
		for i := range 10 {
			c.self.add("owner", "ns", fmt.Sprintf("p%d", i), fmt.Sprint(100+i))
		}
	}
	wrote()
	s := c.causes.take("owner")
	if s.n >= s.total || !c.markOwn("owner", &s) {
		t.Errorf("10 own writes whose events came before the writes were recorded (%d kept of %d): markOwn = false, want true", s.n, s.total)
	}
	// Their events are handled: the writes are forgotten, and the same
	// events again are not the key's own.
	if n := c.self.recent.Len(); n != 0 {
		t.Errorf("%d writes remembered after their events were taken, want 0", n)
	}
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	if s = c.causes.take("owner"); c.markOwn("owner", &s) {
		t.Error("the events of writes already taken: markOwn = true, want false")
	}

	wrote()
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	s = c.causes.take("owner")
	if s.n >= s.total || !c.markOwn("owner", &s) {
		t.Errorf("10 own writes (%d kept of %d): markOwn = false, want true", s.n, s.total)
	}

	wrote()
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	c.causes.add("owner", child(9, "200"), 0) // another writer's, left out
	s = c.causes.take("owner")
	if c.markOwn("owner", &s) {
		t.Error("a foreign write left out for the bounds: markOwn = true, want false")
	}

	wrote()
	merged := child(0, "100")
	merged.merged = true
	c.causes.add("owner", merged, 0)
	s = c.causes.take("owner")
	if c.markOwn("owner", &s) {
		t.Error("an event of several writes ending at an own write: markOwn = true, want false")
	}
	if s.first.merged {
		t.Error("the kept cause still carries merged; causes compare by value")
	}

	// Put back (Debounce) and merged with new triggers, a foreign one left
	// out still counts.
	wrote()
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	held := c.causes.take("owner")
	c.causes.add("owner", child(9, "300"), 0)
	c.causes.putBack("owner", held)
	s = c.causes.take("owner")
	if c.markOwn("owner", &s) {
		t.Error("a foreign write merged in by putBack: markOwn = true, want false")
	}

	// A replay of the own write's state (an informer's first list, a
	// periodic replay), a shard handover, a retry or a requeue: never
	// skipped, alone or with own writes.
	replay := child(0, "100")
	replay.Replay = true
	for _, other := range []Cause{replay, {Source: "Handover"}, {Source: causeRetry}, {Source: causeRequeueAfter}, {Source: causeEnqueue}} {
		wrote()
		c.causes.add("owner", child(1, "101"), 0)
		c.causes.add("owner", other, 0)
		s = c.causes.take("owner")
		if c.markOwn("owner", &s) {
			t.Errorf("an own write with %v: markOwn = true, want false", other)
		}
		c.causes.add("owner", other, 0)
		s = c.causes.take("owner")
		if c.markOwn("owner", &s) {
			t.Errorf("%v alone: markOwn = true, want false", other)
		}
	}

	// Another key's writes are not this key's, nor does its turn forget
	// them.
	wrote()
	c.causes.add("other", child(0, "100"), 0)
	s = c.causes.take("other")
	if c.markOwn("other", &s) {
		t.Error("a write of owner's reconcile woke other: markOwn = true, want false")
	}
	c.causes.add("owner", child(0, "100"), 0)
	if s = c.causes.take("owner"); !c.markOwn("owner", &s) || !s.first.Own {
		t.Errorf("owner's write after another key's turn took its event: markOwn = false or not Own (%+v), want skipped", s.first)
	}
}

func TestSelfWrites_ForgetsTheOldestBeyondItsBound(t *testing.T) {
	var w selfWrites[string]
	for i := range ownwrite.Kept + 10 {
		w.add("k", "ns", "o", fmt.Sprint(i))
	}
	c := Cause{Namespace: "ns", Name: "o", Change: cache.Updated}
	c.ResourceVersion = "0"
	if w.took("k", &c) {
		t.Error("the oldest write is still remembered past the bound")
	}
	if n := w.recent.Len(); n != ownwrite.Kept {
		t.Errorf("%d writes remembered, want %d", n, ownwrite.Kept)
	}
	c.ResourceVersion = fmt.Sprint(ownwrite.Kept + 9)
	if !w.took("k", &c) {
		t.Error("the latest write is not remembered")
	}
	if n := w.recent.Len(); n != ownwrite.Kept-1 {
		t.Errorf("%d writes remembered after one was taken, want %d", n, ownwrite.Kept-1)
	}
}

// Two triggers of one write in one turn (two sources of the kind) are both
// the key's own.
func TestSelfWrites_TwoTriggersOfOneWriteInOneTurnBothMatch(t *testing.T) {
	var w selfWrites[string]
	w.add("k", "ns", "o", "7")
	var s causeSet
	s.add(Cause{Source: "Owns", Kind: "Pod", Namespace: "ns", Name: "o", ResourceVersion: "7", Change: cache.Updated})
	s.add(Cause{Source: "Watches", Kind: "Pod", Namespace: "ns", Name: "o", ResourceVersion: "7", Change: cache.Updated})
	if s.n != 2 || !w.take("k", &s) || !s.first.Own || !s.more.kept[0].Own {
		t.Errorf("two triggers of one own write (%d kept): take = false or not both Own, want both the key's own", s.n)
	}
	if n := w.recent.Len(); n != 0 {
		t.Errorf("%d writes remembered after the turn, want 0", n)
	}
}
