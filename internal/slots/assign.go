package slots

import (
	"cmp"
	"slices"
)

// Assign spreads n slots over members, deterministically: every replica
// that knows the same members computes the same owner for every slot.
// It returns the owner of each slot ("" for every slot when members is
// empty).
//
// It is rendezvous hashing with bounded loads: every (member, slot) pair
// has a pseudo-random score, and pairs are taken from the highest score
// down, each slot going to the first member that has fewer than
// ceil(n/len(members)) slots. So every member gets n/len(members) slots,
// give or take one, and a member joining or leaving moves about 1/N of the
// slots: mostly those whose scores change hands, plus a few that the new
// bounds push along.
func Assign(members []string, n int) []string {
	owners := make([]string, n)
	if len(members) == 0 || n <= 0 {
		return owners
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	type pair struct {
		score  uint64
		member int
		slot   int
	}
	pairs := make([]pair, 0, len(ms)*n)
	for mi, m := range ms {
		hm := Hash(m)
		for s := range n {
			pairs = append(pairs, pair{score: mix(hm ^ mix(uint64(s)+1)), member: mi, slot: s})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.member, b.member); c != 0 {
			return c
		}
		return cmp.Compare(a.slot, b.slot)
	})
	limit := (n + len(ms) - 1) / len(ms)
	load := make([]int, len(ms))
	left := n
	for _, p := range pairs {
		if left == 0 {
			break
		}
		if owners[p.slot] != "" || load[p.member] >= limit {
			continue
		}
		owners[p.slot] = ms[p.member]
		load[p.member]++
		left--
	}
	return owners
}

// mix is the finalizer of SplitMix64: it spreads the bits of x over the
// whole word, which FNV alone does poorly for short, similar inputs.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Owned is the set of slots owners gives to member.
func Owned(owners []string, member string) Set {
	s := New(len(owners))
	for i, o := range owners {
		if o == member {
			s.w[i/64] |= 1 << (i % 64)
		}
	}
	return s
}
