package slots

import (
	"fmt"
	"testing"

	apisharding "k8s.io/apimachinery/pkg/sharding"
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
			if got := Of(lo, n); got != i {
				t.Errorf("n=%d: the first hash of slot %d (%#x) is in slot %d", n, i, lo, got)
			}
			if lo > 0 {
				if got := Of(lo-1, n); got != i-1 {
					t.Errorf("n=%d: the hash before slot %d (%#x) is in slot %d", n, i, lo-1, got)
				}
			}
		}
		if got := Of(^uint64(0), n); got != n-1 {
			t.Errorf("n=%d: the last hash is in slot %d", n, got)
		}
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
		s := New(100, tc.slots...)
		if s.String() != tc.text {
			t.Errorf("%v: String = %q, want %q", tc.slots, s.String(), tc.text)
		}
		back, err := Parse(tc.text, 100)
		if err != nil || !back.Equal(s) {
			t.Errorf("Parse(%q) = %v, %v", tc.text, back, err)
		}
	}
	for _, bad := range []string{"x", "3-1", "100", "-1", "1,,2"} {
		if _, err := Parse(bad, 100); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
	a, b := New(70, 1, 65), New(70, 65, 69)
	if got := a.Union(b).String(); got != "1,65,69" {
		t.Errorf("union %s", got)
	}
	if got := a.Minus(b).String(); got != "1" {
		t.Errorf("minus %s", got)
	}
	if got := a.Intersect(b).String(); got != "65" {
		t.Errorf("intersect %s", got)
	}
	if Full(70).Len() != 70 {
		t.Error("Full")
	}
}

func TestIn_TurnsEachClustersSlotsAndTurnInvertsIt(t *testing.T) {
	const n = 64
	if got, want := In("", "default", n), Of(Hash("default"), n); got != want {
		t.Errorf(`In("", "default") = %d, want the plain slot %d`, got, want)
	}
	groups := map[int]bool{}
	for _, c := range []string{"a", "b", "c", "home", "prod-eu-1"} {
		groups[In(c, "default", n)] = true
		mine := New(n, 1, 5, 6, 63)
		hashSlots := Turn(mine, c)
		if hashSlots.Len() != mine.Len() {
			t.Fatalf("Turn(%s) has %d slots, want %d", c, hashSlots.Len(), mine.Len())
		}
		for h := range n {
			g := (h + Offset(c, n)) % n
			if hashSlots.Has(h) != mine.Has(g) {
				t.Errorf("cluster %s: hash slot %d in the turned set is %v, group slot %d in the set is %v", c, h, hashSlots.Has(h), g, mine.Has(g))
			}
		}
	}
	if len(groups) < 3 {
		t.Errorf("namespace default lands in %d distinct group slots over 5 clusters, want them spread", len(groups))
	}
}
