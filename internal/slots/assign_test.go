package slots

import (
	"fmt"
	"slices"
	"testing"
)

func members(n int, prefix string) []string {
	var ms []string
	for i := range n {
		ms = append(ms, fmt.Sprintf("%s-%d-%08x", prefix, i, Hash(fmt.Sprint(prefix, i))&0xffffffff))
	}
	return ms
}

func TestAssign_IsDeterministicAndBalanced(t *testing.T) {
	for _, n := range []int{1, 7, 64, 256} {
		for k := 1; k <= 5; k++ {
			ms := members(k, "m")
			a := Assign(ms, n)
			rev := slices.Clone(ms)
			slices.Reverse(rev)
			if b := Assign(append(rev, ms[0]), n); !slices.Equal(a, b) {
				t.Errorf("%d slots, %d members: the assignment depends on order or duplicates", n, k)
			}
			load := map[string]int{}
			for i, o := range a {
				if !slices.Contains(ms, o) {
					t.Fatalf("slot %d owned by %q, not a member", i, o)
				}
				load[o]++
			}
			for _, m := range ms {
				// Bounded loads give every member at most ceil(n/k), so
				// none has fewer than what the others leave.
				if hi := (n + k - 1) / k; load[m] > hi || load[m] < n-(k-1)*hi {
					t.Errorf("%d slots over %d members: %s has %d", n, k, m, load[m])
				}
			}
		}
	}
	if got := Assign(nil, 4); !slices.Equal(got, []string{"", "", "", ""}) {
		t.Errorf("no members: %q", got)
	}
}

// A fourth member takes a quarter of the slots, and moves few besides.
func TestAssign_AJoiningMemberMovesAboutItsShare(t *testing.T) {
	const n = 64
	total := 0
	for trial := range 50 {
		ms := members(3, fmt.Sprint("t", trial))
		before := Assign(ms, n)
		newcomer := fmt.Sprintf("new-%d", trial)
		after := Assign(append(ms, newcomer), n)
		moved, toNew := 0, 0
		for i := range n {
			if before[i] != after[i] {
				moved++
				if after[i] == newcomer {
					toNew++
				}
			}
		}
		if toNew != n/4 {
			t.Errorf("trial %d: the newcomer got %d slots, want %d", trial, toNew, n/4)
		}
		if moved > n*4/10 {
			t.Errorf("trial %d: %d of %d slots moved", trial, moved, n)
		}
		total += moved
		// And leaving again restores the old assignment.
		if back := Assign(ms, n); !slices.Equal(back, before) {
			t.Errorf("trial %d: the assignment is not a function of the members", trial)
		}
	}
	if avg := float64(total) / 50 / n; avg > 0.32 {
		t.Errorf("on average %.2f of the slots moved; want close to 0.25", avg)
	}
}
