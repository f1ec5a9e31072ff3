package ownwrite_test

import (
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/internal/ownwrite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWriteOf_TellsObjectsAndVersionsApart(t *testing.T) {
	a, ok := ownwrite.WriteOf("ns", "a", "10")
	if !ok {
		t.Fatal("WriteOf(ns, a, 10): not ok, want ok for an integer resourceVersion")
	}
	if again, _ := ownwrite.WriteOf("ns", "a", "10"); again != a {
		t.Error("the same write made twice differs")
	}
	for _, other := range [][3]string{{"ns", "b", "10"}, {"ns", "a", "11"}, {"nsa", "", "10"}, {"n", "sa", "10"}} {
		if w, _ := ownwrite.WriteOf(other[0], other[1], other[2]); w == a {
			t.Errorf("WriteOf%v equals WriteOf(ns, a, 10)", other)
		}
	}
	if _, ok := ownwrite.WriteOf("ns", "a", "x10"); ok {
		t.Error("WriteOf with a resourceVersion that is not an integer: ok, want not ok")
	}
}

func TestRecent_KeepsTheLatestWritesWithTheirValues(t *testing.T) {
	var r ownwrite.Recent[string]
	w := func(i int) ownwrite.Write {
		at, _ := ownwrite.WriteOf("ns", "o", strconv.Itoa(i))
		return at
	}
	if _, forgot := r.Add(w(0), "k0"); forgot {
		t.Error("the first write made another forgotten")
	}
	r.Add(w(0), "k1")
	if v, ok := r.Get(w(0)); !ok || v != "k1" || r.Len() != 1 {
		t.Errorf("a write added again: Get = %q, %v, Len %d; want k1, true, 1", v, ok, r.Len())
	}
	for i := 1; i < ownwrite.Kept; i++ {
		if _, forgot := r.Add(w(i), "k"); forgot {
			t.Fatalf("write %d of %d made another forgotten", i, ownwrite.Kept)
		}
	}
	forgot, ok := r.Add(w(ownwrite.Kept), "k")
	if !ok || forgot != w(0) {
		t.Errorf("one write past the bound forgot %v (%v), want the oldest", forgot, ok)
	}
	if _, ok := r.Get(w(0)); ok || r.Len() != ownwrite.Kept {
		t.Errorf("past the bound: oldest still kept %v, Len %d; want false, %d", ok, r.Len(), ownwrite.Kept)
	}
	if _, ok := r.Get(w(ownwrite.Kept)); !ok {
		t.Error("the latest write is not kept")
	}
}

func TestRecent_ForgetsWritesAndHoldsRoomOnlyForTheRest(t *testing.T) {
	var r ownwrite.Recent[string]
	w := func(i int) ownwrite.Write {
		at, _ := ownwrite.WriteOf("ns", "o", strconv.Itoa(i))
		return at
	}
	const n = 1000
	for i := range n {
		r.Add(w(i), strconv.Itoa(i))
	}
	// All but every hundredth forgotten: the rest are still there, with
	// their values, and the oldest of them is still forgotten first.
	for i := range n {
		if i%100 != 0 {
			r.Forget(w(i))
		}
	}
	r.Forget(w(1)) // again: nothing
	if r.Len() != n/100 {
		t.Fatalf("Len after forgetting = %d, want %d", r.Len(), n/100)
	}
	for i := 0; i < n; i += 100 {
		if v, ok := r.Get(w(i)); !ok || v != strconv.Itoa(i) {
			t.Errorf("write %d after the others were forgotten: %q, %v; want %q", i, v, ok, strconv.Itoa(i))
		}
	}
	if _, ok := r.Get(w(1)); ok {
		t.Error("a forgotten write is still remembered")
	}
	// The oldest remembered is still forgotten first, and not before Kept
	// writes have come after it.
	added := n
	for {
		forgot, ok := r.Add(w(added), "new")
		added++
		if ok {
			if forgot != w(0) || added-1 < ownwrite.Kept {
				t.Errorf("write %d forgot %v, want write 0 and no sooner than Kept writes after it", added-1, forgot)
			}
			break
		}
	}
	// Forgetting every write lets it start afresh.
	for i := range added {
		r.Forget(w(i))
	}
	if r.Len() != 0 {
		t.Fatalf("Len after forgetting all = %d, want 0", r.Len())
	}
	if _, forgot := r.Add(w(5), "again"); forgot {
		t.Error("the first write after all were forgotten made another forgotten")
	}
	if v, ok := r.Get(w(5)); !ok || v != "again" {
		t.Errorf("a write added again after it was forgotten: %q, %v; want again", v, ok)
	}
}
