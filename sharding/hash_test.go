package sharding

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/internal/slots"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

// The selector for a set of slots matches, on the API server's own
// evaluation, exactly the objects whose key hashes into the set.
func TestSelector_MatchesExactlyTheObjectsOfItsSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, key := range []Key{ByNamespace, ByUID} {
		for _, n := range []int{2, 3, 64, 100} {
			for trial := range 20 {
				var held []int
				for i := range n {
					if rng.IntN(2) == 0 {
						held = append(held, i)
					}
				}
				s := slots.New(n, held...)
				sel := selector(key, s)
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
					if want := s.Has(slots.Of(slots.Hash(key.value(obj)), n)); got != want {
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
	got := selector(ByNamespace, slots.New(4, 0, 1, 3))
	want := "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || " +
		"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := selector(ByUID, slots.New(4)); !strings.Contains(got, "object.metadata.uid") {
		t.Errorf("empty set by UID: %q", got)
	}
}
