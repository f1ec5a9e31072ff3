package controller

import "testing"

// Waves of changes to the same keys reuse the pending causes' map: the
// workers catching up within a wave (the map emptying early) do not drop
// it, while a burst followed by a trickle of lone keys lets it go, and a
// first burst (an initial list) leaves nothing behind.
func TestPendingCauses_KeepsItsMapThroughALullWithinWavesAndLetsGoAfter(t *testing.T) {
	var p pendingCauses[int]
	burst := func(from, n int) {
		for k := from; k < from+n; k++ {
			p.add(k, Cause{Source: "For"}, 0)
		}
		for k := from; k < from+n; k++ {
			if s := p.take(k); s.total != 1 {
				t.Fatalf("key %d taken with %d causes, want 1", k, s.total)
			}
		}
	}
	burst(0, 2000)
	if p.sets != nil {
		t.Fatal("a first burst of 2000 keys left its map behind")
	}
	burst(0, 2000) // made at the first one's size
	if p.sets == nil {
		t.Fatal("a second burst like the first dropped its map")
	}
	for range 3 {
		burst(0, 10) // the workers catch up early in the next wave
		burst(0, 2000)
		if p.sets == nil {
			t.Fatal("a wave that emptied the map early dropped it")
		}
	}
	for range maxLulls + 1 {
		burst(0, 1)
	}
	if p.sets != nil {
		t.Fatalf("the map is kept after %d lone keys", maxLulls+1)
	}
}
