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
	c.causes.own = func(key string, cause *Cause) bool { return c.self.wrote(key, cause) }
	child := func(i int, rv string) Cause {
		return Cause{Source: "Owns", Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p%d", i), ResourceVersion: rv, Change: cache.Updated}
	}
	// The watch events of the writes can come before the writes are
	// recorded: the triggers left out are matched when the key is taken.
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	for i := range 10 {
		c.self.add("owner", "ns", fmt.Sprintf("p%d", i), fmt.Sprint(100+i))
	}
	s := c.causes.take("owner")
	if s.n >= s.total || !c.selfInflicted("owner", &s) {
		t.Errorf("10 own writes whose events came before the writes were recorded (%d kept of %d): selfInflicted = false, want true", s.n, s.total)
	}

	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	s = c.causes.take("owner")
	if s.n >= s.total || !c.selfInflicted("owner", &s) {
		t.Errorf("10 own writes (%d kept of %d): selfInflicted = false, want true", s.n, s.total)
	}

	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	c.causes.add("owner", child(9, "200"), 0) // another writer's, left out
	s = c.causes.take("owner")
	if c.selfInflicted("owner", &s) {
		t.Error("a foreign write left out for the bounds: selfInflicted = true, want false")
	}

	merged := child(0, "100")
	merged.merged = true
	c.causes.add("owner", merged, 0)
	s = c.causes.take("owner")
	if c.selfInflicted("owner", &s) {
		t.Error("an event of several writes ending at an own write: selfInflicted = true, want false")
	}
	if s.first.merged {
		t.Error("the kept cause still carries merged; causes compare by value")
	}

	// Put back (Debounce) and merged with new triggers, a foreign one left
	// out still counts.
	for i := range 10 {
		c.causes.add("owner", child(i, fmt.Sprint(100+i)), 0)
	}
	held := c.causes.take("owner")
	c.causes.add("owner", child(9, "300"), 0)
	c.causes.putBack("owner", held)
	s = c.causes.take("owner")
	if c.selfInflicted("owner", &s) {
		t.Error("a foreign write merged in by putBack: selfInflicted = true, want false")
	}

	// A replay of the own write's state (an informer's first list, a
	// periodic replay), a shard handover, a retry or a requeue: never
	// skipped, alone or with own writes.
	replay := child(0, "100")
	replay.Replay = true
	for _, other := range []Cause{replay, {Source: "Handover"}, {Source: causeRetry}, {Source: causeRequeueAfter}, {Source: causeEnqueue}} {
		c.causes.add("owner", child(1, "101"), 0)
		c.causes.add("owner", other, 0)
		s = c.causes.take("owner")
		if c.selfInflicted("owner", &s) {
			t.Errorf("an own write with %v: selfInflicted = true, want false", other)
		}
		c.causes.add("owner", other, 0)
		s = c.causes.take("owner")
		if c.selfInflicted("owner", &s) {
			t.Errorf("%v alone: selfInflicted = true, want false", other)
		}
	}

	// Another key's writes are not this key's.
	c.causes.add("other", child(0, "100"), 0)
	s = c.causes.take("other")
	if c.selfInflicted("other", &s) {
		t.Error("a write of owner's reconcile woke other: selfInflicted = true, want false")
	}
}

func TestSelfWrites_ForgetsTheOldestBeyondItsBound(t *testing.T) {
	var w selfWrites[string]
	for i := range ownwrite.Kept + 10 {
		w.add("k", "ns", "o", fmt.Sprint(i))
	}
	c := Cause{Namespace: "ns", Name: "o", Change: cache.Updated}
	c.ResourceVersion = "0"
	if w.wrote("k", &c) {
		t.Error("the oldest write is still remembered past the bound")
	}
	c.ResourceVersion = fmt.Sprint(ownwrite.Kept + 9)
	if !w.wrote("k", &c) {
		t.Error("the latest write is not remembered")
	}
	if n := w.recent.Len(); n != ownwrite.Kept {
		t.Errorf("%d writes remembered, want %d", n, ownwrite.Kept)
	}
}
