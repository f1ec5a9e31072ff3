package ownwrite

import (
	"strconv"
	"testing"
)

func TestRecent_ForgettingShrinksItsRoomAndLetsGoWhenEmpty(t *testing.T) {
	var r Recent[int]
	w := func(i int) Write {
		at, _ := WriteOf("ns", "o", strconv.Itoa(i))
		return at
	}
	for i := range 2000 {
		r.Add(w(i), i)
	}
	if cap(r.ring) < 2000 {
		t.Fatalf("ring of %d for 2000 writes", cap(r.ring))
	}
	for i := range 1990 {
		r.Forget(w(i))
	}
	if cap(r.ring) > 2*shrinkFrom {
		t.Errorf("10 writes left of 2000 in a ring of %d, want at most %d", cap(r.ring), 2*shrinkFrom)
	}
	var left []Write
	for _, x := range r.ring {
		if _, ok := r.by[x]; ok {
			left = append(left, x)
		}
	}
	for i := range 10 {
		if len(left) != 10 || left[i] != w(1990+i) || r.by[w(1990+i)] != 1990+i {
			t.Fatalf("after shrinking, the ring holds %d writes remembered, want writes 1990-1999 in order with their values", len(left))
		}
	}
	for i := 1990; i < 2000; i++ {
		r.Forget(w(i))
	}
	if r.by != nil || r.ring != nil {
		t.Errorf("all forgotten: map %v, ring of %d kept; want neither", r.by != nil, cap(r.ring))
	}
}

// Writes that come one at a time, each forgotten before the next, reuse
// the first ring and map.
func TestRecent_OneWriteAtATimeMakesNoNewRoom(t *testing.T) {
	var r Recent[int]
	writes := make([]Write, 100)
	for i := range writes {
		writes[i], _ = WriteOf("ns", "o", strconv.Itoa(i))
	}
	r.Add(writes[0], 0)
	r.Forget(writes[0])
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		i = (i + 1) % len(writes)
		r.Add(writes[i], i)
		r.Forget(writes[i])
	})
	if allocs != 0 || r.Len() != 0 || cap(r.ring) != firstRing {
		t.Errorf("a write added and forgotten: %v allocations, %d left, ring of %d; want 0, 0, %d", allocs, r.Len(), cap(r.ring), firstRing)
	}
}
