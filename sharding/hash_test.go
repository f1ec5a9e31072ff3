package sharding

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

func TestHash_IsTheAPIServersFNV1a(t *testing.T) {
	for _, v := range []string{"", "default", "kube-system", "5f2c6a5e-0b7a-4d3c-9a53-2d1b1c0e4f11"} {
		if got, want := fmt.Sprintf("%016x", Hash(v)), apisharding.HashField(v); got != want {
			t.Errorf("Hash(%q) = %s, the API server's is %s", v, got, want)
		}
	}
}

func TestSlotOf_CutsTheHashSpaceIntoEqualRanges(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64, 4096} {
		for i := range n {
			hi, lo := bound(i, n)
			if hi != 0 {
				t.Fatalf("bound(%d, %d) beyond 2^64", i, n)
			}
			if got := SlotOf(lo, n); got != i {
				t.Errorf("n=%d: the first hash of slot %d (%#x) is in slot %d", n, i, lo, got)
			}
			if lo > 0 {
				if got := SlotOf(lo-1, n); got != i-1 {
					t.Errorf("n=%d: the hash before slot %d (%#x) is in slot %d", n, i, lo-1, got)
				}
			}
		}
		if got := SlotOf(^uint64(0), n); got != n-1 {
			t.Errorf("n=%d: the last hash is in slot %d", n, got)
		}
	}
}

// The selector for a set of slots matches, on the API server's own
// evaluation, exactly the objects whose key hashes into the set.
func TestSelector_MatchesExactlyTheObjectsOfItsSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, key := range []Key{ByNamespace, ByUID} {
		for _, n := range []int{2, 3, 64, 100} {
			for trial := range 20 {
				var slots []int
				for i := range n {
					if rng.IntN(2) == 0 {
						slots = append(slots, i)
					}
				}
				s := NewSet(n, slots...)
				sel := Selector(key, s)
				if s.Len() == n {
					if sel != "" {
						t.Errorf("full set: selector %q, want none", sel)
					}
					continue
				}
				matcher := parseSelector(t, sel)
				for range 200 {
					v := fmt.Sprintf("v-%d-%x", trial, rng.Uint64())
					obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: v, UID: types.UID(v)}}
					got, err := matcher.Matches(obj)
					if err != nil {
						t.Fatal(err)
					}
					if want := s.Has(SlotOf(Hash(key.value(obj)), n)); got != want {
						t.Fatalf("key %s, %d slots %s: server match of %q = %v, slot membership %v (selector %s)", key, n, s, v, got, want, sel)
					}
				}
			}
		}
	}
}

// parseSelector reads what Selector writes into the API server's selector
// type (the CEL parser that the API server uses lives in k8s.io/apiserver;
// this reads the same grammar, restricted to what Selector produces).
func parseSelector(t *testing.T, sel string) apisharding.Selector {
	t.Helper()
	var reqs []apisharding.ShardRangeRequirement
	for _, part := range strings.Split(sel, " || ") {
		var field, start, end string
		inner, ok := strings.CutPrefix(part, "shardRange(")
		if !ok || !strings.HasSuffix(inner, ")") {
			t.Fatalf("selector part %q is not a shardRange", part)
		}
		args := strings.Split(strings.TrimSuffix(inner, ")"), ", ")
		if len(args) != 3 {
			t.Fatalf("selector part %q has %d arguments", part, len(args))
		}
		field, start, end = args[0], strings.Trim(args[1], "'"), strings.Trim(args[2], "'")
		if !apisharding.HexLess(start, end) {
			t.Fatalf("selector part %q: start is not below end", part)
		}
		reqs = append(reqs, apisharding.ShardRangeRequirement{Key: field, Start: start, End: end})
	}
	return apisharding.NewSelector(reqs...)
}

func TestSelector_JoinsAdjacentSlots(t *testing.T) {
	got := Selector(ByNamespace, NewSet(4, 0, 1, 3))
	want := "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || " +
		"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := Selector(ByUID, NewSet(4)); !strings.Contains(got, "object.metadata.uid") {
		t.Errorf("empty set by UID: %q", got)
	}
}

func TestSet_StringRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		slots []int
		text  string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 5, 7, 8, 99}, "0-2,5,7-8,99"},
	} {
		s := NewSet(100, tc.slots...)
		if s.String() != tc.text {
			t.Errorf("%v: String = %q, want %q", tc.slots, s.String(), tc.text)
		}
		back, err := ParseSet(tc.text, 100)
		if err != nil || !back.Equal(s) {
			t.Errorf("ParseSet(%q) = %v, %v", tc.text, back, err)
		}
	}
	for _, bad := range []string{"x", "3-1", "100", "-1", "1,,2"} {
		if _, err := ParseSet(bad, 100); err == nil {
			t.Errorf("ParseSet(%q) succeeded", bad)
		}
	}
	a, b := NewSet(70, 1, 65), NewSet(70, 65, 69)
	if got := a.Union(b).String(); got != "1,65,69" {
		t.Errorf("union %s", got)
	}
	if got := a.minus(b).String(); got != "1" {
		t.Errorf("minus %s", got)
	}
	if got := a.Intersect(b).String(); got != "65" {
		t.Errorf("intersect %s", got)
	}
	if FullSet(70).Len() != 70 {
		t.Error("FullSet")
	}
}
