package cache_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
)

// model is the naive reference: a plain map, linear scans for every query.
type model struct {
	objs    map[cache.Key]*corev1.ConfigMap
	rv      string
	encoded bool
}

// same reports whether the store's object a is the model's b: the same
// pointer, or for an encoded store an equal value.
func (m *model) same(a, b *corev1.ConfigMap) bool {
	if !m.encoded {
		return a == b
	}
	return equality.Semantic.DeepEqual(a, b)
}

func (m *model) list(ns string, sel labels.Selector) []string {
	var out []string
	for k, o := range m.objs {
		if (ns == "" || k.Namespace == ns) && (sel == nil || sel.Matches(labels.Set(o.Labels))) {
			out = append(out, k.String()+"@"+o.ResourceVersion)
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) byLabel(kv string) []string {
	var out []string
	for k, o := range m.objs {
		for lk, lv := range o.Labels {
			if lk+"="+lv == kv {
				out = append(out, k.String()+"@"+o.ResourceVersion)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) byOwner(uid string) []string {
	var out []string
	for k, o := range m.objs {
		for _, r := range o.OwnerReferences {
			if string(r.UID) == uid {
				out = append(out, k.String()+"@"+o.ResourceVersion)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func keysOf(objs []*corev1.ConfigMap) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, cache.KeyOf(o).String()+"@"+o.ResourceVersion)
	}
	slices.Sort(out)
	return out
}

var (
	modelNamespaces = []string{"", "a", "b"}
	modelNames      = []string{"x", "y", "z", "w"}
	modelLabelVals  = []string{"1", "2"}
	modelOwners     = []string{"o1", "o2", "o3"}
)

// opReader turns fuzz bytes (or a seeded generator) into choices.
type opReader interface{ next(n int) int }

type byteOps struct{ b []byte }

func (r *byteOps) next(n int) int {
	if len(r.b) == 0 {
		return 0
	}
	v := int(r.b[0]) % n
	r.b = r.b[1:]
	return v
}

func (r *byteOps) done() bool { return len(r.b) == 0 }

type randOps struct{ r *rand.Rand }

func (r randOps) next(n int) int { return r.r.IntN(n) }

// runModel applies steps operations chosen by ops to a store and to the
// model, comparing every query after each step.
//
// An encoded store hands out a new object on every read, so there objects
// are compared by value instead of by identity.
func runModel(t *testing.T, encoded bool, ops opReader, steps int, more func() bool) {
	t.Helper()
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{Encoded: encoded, Indexes: map[string]cache.IndexFunc[*corev1.ConfigMap]{
		cache.IndexLabel: cache.LabelIndexFunc[*corev1.ConfigMap],
		cache.IndexOwner: cache.OwnerIndexFunc[*corev1.ConfigMap],
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := &model{objs: map[cache.Key]*corev1.ConfigMap{}, encoded: encoded}
	rv := 0
	uid := 0
	mk := func() *corev1.ConfigMap {
		rv++
		k := cache.Key{Namespace: modelNamespaces[ops.next(len(modelNamespaces))], Name: modelNames[ops.next(len(modelNames))]}
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, ResourceVersion: strconv.Itoa(rv)}}
		if prev, ok := m.objs[k]; ok && ops.next(4) != 0 {
			o.UID = prev.UID // usually an update of the same object, sometimes a re-creation
		} else {
			uid++
			o.UID = types.UID("u" + strconv.Itoa(uid))
		}
		if v := ops.next(3); v > 0 {
			o.Labels = map[string]string{"app": modelLabelVals[v-1]}
			if ops.next(2) == 1 {
				o.Labels["tier"] = modelLabelVals[ops.next(2)]
			}
		}
		for range ops.next(3) {
			o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{UID: types.UID(modelOwners[ops.next(len(modelOwners))])})
		}
		return o
	}
	for step := 0; step < steps && (more == nil || more()); step++ {
		var desc string
		switch op := ops.next(10); {
		case op < 1: // a burst of applies and deletes, written at once
			var batch []cache.Change[*corev1.ConfigMap]
			for range 1 + ops.next(4) {
				c := cache.Change[*corev1.ConfigMap]{Obj: mk()}
				if ops.next(3) == 0 {
					c.Delete = true
					c.Obj.Labels, c.Obj.OwnerReferences = nil, nil // a final state the index never saw
				}
				c.RV = c.Obj.ResourceVersion
				batch = append(batch, c)
			}
			desc = fmt.Sprintf("write %d changes", len(batch))
			w.Write(batch)
			for i, c := range batch {
				k := cache.KeyOf(c.Obj)
				prev, had := m.objs[k]
				if c.Existed != had || (had && !m.same(c.Old, prev)) {
					t.Fatalf("step %d %s: change %d (%s, delete %v) gave (%v, %v), model had (%v, %v)", step, desc, i, k, c.Delete, c.Old, c.Existed, prev, had)
				}
				if c.Delete {
					delete(m.objs, k)
				} else {
					m.objs[k] = c.Obj
				}
				m.rv = c.RV
			}
		case op < 5: // apply
			o := mk()
			desc = "apply " + cache.KeyOf(o).String()
			old, existed := w.Apply(o, o.GetResourceVersion())
			prev, had := m.objs[cache.KeyOf(o)]
			if existed != had || (had && !m.same(old, prev)) {
				t.Fatalf("step %d %s: Apply returned (%v, %v), model had (%v, %v)", step, desc, old, existed, prev, had)
			}
			m.objs[cache.KeyOf(o)] = o
			m.rv = o.ResourceVersion
		case op < 8: // delete
			rv++
			k := cache.Key{Namespace: modelNamespaces[ops.next(len(modelNamespaces))], Name: modelNames[ops.next(len(modelNames))]}
			desc = "delete " + k.String()
			final := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, ResourceVersion: strconv.Itoa(rv)}}
			old, existed := w.Delete(final, final.GetResourceVersion())
			prev, had := m.objs[k]
			if existed != had || (had && !m.same(old, prev)) {
				t.Fatalf("step %d %s: Delete returned (%v, %v), model had (%v, %v)", step, desc, old, existed, prev, had)
			}
			delete(m.objs, k)
			m.rv = final.ResourceVersion
		case op < 9: // replace with a snapshot
			n := ops.next(8)
			var snap []*corev1.ConfigMap
			next := map[cache.Key]*corev1.ConfigMap{}
			for range n {
				var o *corev1.ConfigMap
				if len(m.objs) > 0 && ops.next(2) == 0 {
					// an unchanged object, as a fresh copy the way a relist delivers it
					keys := sortedKeys(m.objs)
					o = m.objs[keys[ops.next(len(keys))]].DeepCopy()
				} else {
					o = mk()
				}
				snap = append(snap, o)
				next[cache.KeyOf(o)] = o
			}
			rv++
			desc = fmt.Sprintf("replace with %d objects", len(snap))
			var changes []cache.Event[*corev1.ConfigMap]
			if ops.next(2) == 0 {
				changes = w.Replace(snap, strconv.Itoa(rv))
			} else {
				// The same, collected object by object as a listing
				// arrives.
				desc += " collected in a Snapshot"
				s := w.NewSnapshot()
				if ops.next(2) == 0 {
					s = &cache.Snapshot[*corev1.ConfigMap]{} // the zero value works too
				}
				for _, o := range snap {
					s.Add(o)
				}
				if ops.next(3) == 0 {
					desc += ", without w"
					s.Retain(func(o *corev1.ConfigMap) bool { return o.Name != "w" })
					maps.DeleteFunc(next, func(k cache.Key, _ *corev1.ConfigMap) bool { return k.Name == "w" })
				}
				if s.Len() != len(next) {
					t.Fatalf("step %d %s: Snapshot.Len() = %d, want %d distinct keys", step, desc, s.Len(), len(next))
				}
				var added []cache.Key
				changes, added = w.ReplaceLazily(s, strconv.Itoa(rv))
				if !encoded && added != nil {
					t.Fatalf("step %d %s: ReplaceLazily's added = %v for a plain store, want nil", step, desc, added)
				}
				for _, k := range added { // an encoded store's new objects, read as a handler would
					o, ok := store.Get(k.Namespace, k.Name)
					if !ok {
						t.Fatalf("step %d %s: %s reported added but not in the store", step, desc, k)
					}
					changes = append(changes, cache.Event[*corev1.ConfigMap]{Kind: cache.Added, New: o})
				}
			}
			checkChanges(t, step, m.objs, next, changes)
			// Unchanged objects keep their stored pointer.
			for k, o := range next {
				if prev, ok := m.objs[k]; ok && prev.UID == o.UID && prev.ResourceVersion == o.ResourceVersion {
					next[k] = prev
				}
			}
			m.objs = next
			m.rv = strconv.Itoa(rv)
		default: // bookmark
			rv++
			desc = "bookmark"
			w.Bookmark(strconv.Itoa(rv))
			m.rv = strconv.Itoa(rv)
		}
		compareStore(t, step, desc, store, m)
	}
}

func sortedKeys(objs map[cache.Key]*corev1.ConfigMap) []cache.Key {
	keys := make([]cache.Key, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b cache.Key) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return keys
}

// checkChanges verifies the diff Replace reported against the model.
func checkChanges(t *testing.T, step int, before, after map[cache.Key]*corev1.ConfigMap, changes []cache.Event[*corev1.ConfigMap]) {
	t.Helper()
	var want, got []string
	for k, o := range before {
		n, ok := after[k]
		switch {
		case !ok, n.UID != o.UID:
			want = append(want, "D "+k.String()+"@"+o.ResourceVersion)
		}
	}
	for k, n := range after {
		o, ok := before[k]
		switch {
		case !ok, n.UID != o.UID:
			want = append(want, "A "+k.String()+"@"+n.ResourceVersion)
		case o.ResourceVersion != n.ResourceVersion:
			want = append(want, "U "+k.String()+"@"+o.ResourceVersion+">"+n.ResourceVersion)
		}
	}
	seenAdd := false
	for _, c := range changes {
		switch c.Kind {
		case cache.Deleted:
			if seenAdd {
				t.Fatalf("step %d: Replace reported a Deleted after an Added/Updated: %v", step, changes)
			}
			got = append(got, "D "+cache.KeyOf(c.Old).String()+"@"+c.Old.ResourceVersion)
		case cache.Added:
			seenAdd = true
			got = append(got, "A "+cache.KeyOf(c.New).String()+"@"+c.New.ResourceVersion)
		case cache.Updated:
			seenAdd = true
			got = append(got, "U "+cache.KeyOf(c.New).String()+"@"+c.Old.ResourceVersion+">"+c.New.ResourceVersion)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Fatalf("step %d: Replace changes\n got %v\nwant %v", step, got, want)
	}
}

func compareStore(t *testing.T, step int, desc string, s *cache.Store[*corev1.ConfigMap], m *model) {
	t.Helper()
	fail := func(what string, got, want any) {
		t.Helper()
		t.Fatalf("step %d (%s): %s\n got %v\nwant %v", step, desc, what, got, want)
	}
	if got, want := s.Len(), len(m.objs); got != want {
		fail("Len", got, want)
	}
	if got, want := s.ResourceVersion(), m.rv; got != want {
		fail("ResourceVersion", got, want)
	}
	for _, ns := range modelNamespaces {
		for _, name := range modelNames {
			got, ok := s.Get(ns, name)
			want, wok := m.objs[cache.Key{Namespace: ns, Name: name}]
			if ok != wok || (ok && !m.same(got, want)) {
				fail("Get "+ns+"/"+name, got, want)
			}
		}
	}
	sels := []labels.Selector{nil, labels.Everything(), labels.SelectorFromSet(labels.Set{"app": "1"}),
		labels.SelectorFromSet(labels.Set{"app": "2", "tier": "1"}), labels.Set{"tier": "2"}.AsSelector()}
	if sel, err := labels.Parse("app in (1),tier!=2"); err == nil {
		sels = append(sels, sel)
	} else {
		t.Fatal(err)
	}
	if sel, err := labels.Parse("!app"); err == nil {
		sels = append(sels, sel)
	} else {
		t.Fatal(err)
	}
	for _, sel := range sels {
		if got, want := keysOf(s.List(sel)), m.list("", sel); !slices.Equal(got, want) {
			fail(fmt.Sprintf("List(%v)", sel), got, want)
		}
		for _, ns := range modelNamespaces[1:] {
			if got, want := keysOf(s.ListInNamespace(ns, sel)), m.list(ns, sel); !slices.Equal(got, want) {
				fail(fmt.Sprintf("ListInNamespace(%q, %v)", ns, sel), got, want)
			}
		}
	}
	for _, ns := range modelNamespaces[1:] {
		objs, err := s.ByIndex(cache.IndexNamespace, ns)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := keysOf(objs), m.list(ns, nil); !slices.Equal(got, want) {
			fail("ByIndex(namespace, "+ns+")", got, want)
		}
	}
	for _, k := range []string{"app", "tier"} {
		for _, v := range modelLabelVals {
			objs, err := s.ByIndex(cache.IndexLabel, k+"="+v)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := keysOf(objs), m.byLabel(k+"="+v); !slices.Equal(got, want) {
				fail("ByIndex(label, "+k+"="+v+")", got, want)
			}
		}
	}
	for _, uid := range modelOwners {
		objs, err := s.ByIndex(cache.IndexOwner, uid)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := keysOf(objs), m.byOwner(uid); !slices.Equal(got, want) {
			fail("ByIndex(owner, "+uid+")", got, want)
		}
	}
}

func TestStore_MatchesNaiveModel(t *testing.T) {
	for _, encoded := range []bool{false, true} {
		for seed := range uint64(40) {
			t.Run(fmt.Sprintf("encoded=%v/seed=%d", encoded, seed), func(t *testing.T) {
				runModel(t, encoded, randOps{rand.New(rand.NewPCG(seed, 0x6b6c6f6f70))}, 300, nil)
			})
		}
	}
}

func FuzzStore_MatchesNaiveModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{8, 5, 0, 1, 0, 0, 8, 3, 1, 0, 2, 1, 9, 9, 6, 0, 0})
	f.Add([]byte("\x00\x01\x01\x02\x01\x01\x00\x08\x07\x01\x00\x01\x05\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, encoded := range []bool{false, true} {
			ops := &byteOps{b: data}
			runModel(t, encoded, ops, 1000, func() bool { return !ops.done() })
		}
	})
}
