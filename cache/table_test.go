package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runTableModel applies the operations next chooses to a table and to a Go
// map, checking after each one that both hold the same objects and that
// every object is found from its home slot.
func runTableModel(t *testing.T, next func(n int) int, steps int, more func() bool) {
	t.Helper()
	names := make([]string, 1+next(300))
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	tb := newTable[*corev1.ConfigMap](next(40))
	want := map[string]*corev1.ConfigMap{}
	for step := 0; step < steps && (more == nil || more()); step++ {
		name := names[next(len(names))]
		switch op := next(10); {
		case op < 6:
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: fmt.Sprint(step)}}
			old, existed := tb.put(obj)
			if w, ok := want[name]; ok != existed || old != w {
				t.Fatalf("step %d: put %s replaced %v (%v), want %v (%v)", step, name, old, existed, w, ok)
			}
			want[name] = obj
		case op < 9:
			old, existed := tb.remove(name)
			if w, ok := want[name]; ok != existed || old != w {
				t.Fatalf("step %d: remove %s returned %v (%v), want %v (%v)", step, name, old, existed, w, ok)
			}
			delete(want, name)
		default:
			tb.fit()
		}
		checkTable(t, step, tb, want, names)
	}
}

func checkTable(t *testing.T, step int, tb *table[*corev1.ConfigMap], want map[string]*corev1.ConfigMap, names []string) {
	t.Helper()
	if tb.len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, tb.len(), len(want))
	}
	if tb.len()*tableLoadDen > len(tb.tags)*tableLoadNum {
		t.Fatalf("step %d: %d entries in %d slots, above the maximum load", step, tb.len(), len(tb.tags))
	}
	seen := 0
	for obj := range tb.all() {
		seen++
		if want[obj.Name] != obj {
			t.Fatalf("step %d: table holds %s@%s, want %v", step, obj.Name, obj.ResourceVersion, want[obj.Name])
		}
	}
	if seen != len(want) {
		t.Fatalf("step %d: all yields %d objects, want %d", step, seen, len(want))
	}
	for _, name := range names {
		got, ok := tb.get(name)
		if w, wok := want[name]; ok != wok || got != w {
			t.Fatalf("step %d: get %s = %v (%v), want %v (%v)", step, name, got, ok, w, wok)
		}
	}
}

func TestTable_MatchesAGoMap(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x7461626c65))
			runTableModel(t, r.IntN, 3000, nil)
		})
	}
}

func TestTable_NilIsEmpty(t *testing.T) {
	var tb *table[*corev1.ConfigMap]
	if _, ok := tb.get("x"); ok || tb.len() != 0 {
		t.Fatalf("nil table: get found something or len %d", tb.len())
	}
}

func TestTable_FitSizesASnapshotToItsContents(t *testing.T) {
	tb := newTable[*corev1.ConfigMap](0)
	for i := range 10000 {
		tb.put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}})
	}
	tb.fit()
	// fit leaves at most a ninth of the needed capacity as slack.
	if got, limit := len(tb.tags), capFor(10000)*10/9+1; got > limit {
		t.Fatalf("after fit: %d slots for 10000 objects, want at most %d", got, limit)
	}
	for i := range 10000 {
		if _, ok := tb.get(fmt.Sprintf("cm-%d", i)); !ok {
			t.Fatalf("after fit: cm-%d lost", i)
		}
	}
}

func FuzzTable_MatchesAGoMap(f *testing.F) {
	f.Add([]byte{5, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{255, 0, 1, 1, 2, 7, 1, 9, 9, 1, 7, 3, 9, 2, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func(n int) int {
			if len(data) == 0 {
				return 0
			}
			v := int(data[0]) % n
			data = data[1:]
			return v
		}
		runTableModel(t, next, 2000, func() bool { return len(data) > 0 })
	})
}
