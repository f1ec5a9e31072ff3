package slots

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"
)

// Hash is the 64-bit FNV-1a hash of value, the hash the API server applies
// to the field named in a shard selector.
func Hash(value string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(value))
	return h.Sum64()
}

// Of is the slot of hash h when the hash space is cut into n equal
// slots: slot i holds the hashes in [i·2⁶⁴/n, (i+1)·2⁶⁴/n).
func Of(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// bound is the first hash of slot i of n, as the 128-bit number hi·2⁶⁴+lo:
// ceil(i·2⁶⁴/n), which is 2⁶⁴ (hi 1) for i == n.
func bound(i, n int) (hi, lo uint64) {
	if i >= n {
		return 1, 0
	}
	q, r := bits.Div64(uint64(i), 0, uint64(n))
	if r != 0 {
		q++
	}
	return 0, q
}

// hexBound formats a bound the way shard selectors write it: 0x and 16
// lower-case hex digits, or 0x10000000000000000 for 2⁶⁴.
func hexBound(hi, lo uint64) string {
	if hi != 0 {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", lo)
}

// Selector is the shard selector (metav1.ListOptions.ShardSelector) that
// matches the objects whose field (such as "object.metadata.namespace") hashes into the slots of s: one
// shardRange per run of adjacent slots, joined with ||. It is "" (no
// selector: everything) when s holds every slot. An empty s matches no
// object but those hashing to exactly 0, which the client-side filter drops.
func Selector(field string, s Set) string {
	n := s.Cap()
	if s.Len() == n {
		return ""
	}
	if s.Len() == 0 {
		return fmt.Sprintf("shardRange(%s, '0x0000000000000000', '0x0000000000000001')", field)
	}
	var b strings.Builder
	for i := 0; i < n; {
		if !s.Has(i) {
			i++
			continue
		}
		j := i
		for j < n && s.Has(j) {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(" || ")
		}
		fmt.Fprintf(&b, "shardRange(%s, '%s', '%s')", field, hexBound(bound(i, n)), hexBound(bound(j, n)))
		i = j
	}
	return b.String()
}

// Offset is how far the slots of the fleet cluster named cluster are
// turned against the hash space, so that a namespace (or any key value)
// found in every cluster lands in a different slot in each: the
// cluster's hash slot h is slot (h + Offset(cluster, n)) mod n of the
// group. The cluster "" (a program of one cluster) is not turned.
func Offset(cluster string, n int) int {
	if cluster == "" || n <= 0 {
		return 0
	}
	// Mixed: FNV-1a leaves the top bits (which Of reads) of names that
	// differ only in their last characters, such as "eu-1" and "eu-2",
	// nearly alike.
	return Of(mix(Hash(cluster)), n)
}

// In is the slot of the group that holds key value value of the fleet
// cluster named cluster ("" for a program of one cluster): its hash slot
// turned by the cluster's Offset.
func In(cluster, value string, n int) int {
	return (Of(Hash(value), n) + Offset(cluster, n)) % n
}

// Turn maps a set of the group's slots to the hash slots of the cluster
// named cluster that they hold (the inverse of In's turn), for the
// cluster's shard selector.
func Turn(s Set, cluster string) Set {
	n := s.Cap()
	off := Offset(cluster, n)
	if off == 0 {
		return s
	}
	out := New(n)
	for _, g := range s.Slots() {
		out.Add((g - off + n) % n)
	}
	return out
}
