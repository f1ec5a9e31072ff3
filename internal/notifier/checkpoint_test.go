package notifier

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
)

func committed(t *tracker, scope, key string) (ckEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.committed[scope][key]
	return e, ok
}

// A change is in the checkpoint only once every sink that took it is
// through with it, and never ahead of an earlier change of its object
// still in flight.
func TestTracker_CommitsInEachObjectsOrderOnceEverySinkIsDone(t *testing.T) {
	tr := newTracker(10, nil)
	e1, e2 := &ckEntry{UID: "u", RV: "1"}, &ckEntry{UID: "u", RV: "2"}
	p1 := tr.begin("cm@ns", "ns/a", e1)
	p1.hold() // sink X took it
	p1.hold() // sink Y took it
	tr.finish(p1, true)
	p2 := tr.begin("cm@ns", "ns/a", e2)
	p2.hold() // only sink Y took the second
	tr.finish(p2, true)

	tr.finish(p1, true) // Y delivered the first
	tr.finish(p2, true) // Y delivered the second; X still has the first
	if e, ok := committed(tr, "cm@ns", "ns/a"); ok {
		t.Fatalf("committed %+v while the first change is in flight on one sink", e)
	}
	tr.finish(p1, true) // X delivered the first
	if e, _ := committed(tr, "cm@ns", "ns/a"); e.RV != "2" {
		t.Fatalf("committed %+v, want rv 2 once both are delivered", e)
	}
	// Another object's change is independent; a delete removes.
	tr.finish(tr.begin("cm@ns", "ns/b", &ckEntry{UID: "v", RV: "5"}), true)
	tr.finish(tr.begin("cm@ns", "ns/a", nil), true)
	if _, ok := committed(tr, "cm@ns", "ns/a"); ok {
		t.Error("a deleted object is still in the checkpoint")
	}
	if _, ok := committed(tr, "cm@ns", "ns/b"); !ok {
		t.Error("ns/b not committed")
	}
}

func TestTracker_AChangeDroppedByTheStopHoldsBackItsObject(t *testing.T) {
	tr := newTracker(10, nil)
	tr.finish(tr.begin("cm@ns", "ns/a", &ckEntry{RV: "1"}), true)
	p := tr.begin("cm@ns", "ns/a", &ckEntry{RV: "2"})
	p.hold()
	tr.finish(p, true)
	tr.finish(p, false) // the sink dropped it at the stop
	tr.finish(tr.begin("cm@ns", "ns/a", &ckEntry{RV: "3"}), true)
	if e, _ := committed(tr, "cm@ns", "ns/a"); e.RV != "1" {
		t.Errorf("committed rv %s, want 1: the next start must send rv 2 (and 3) again", e.RV)
	}
}

func TestTracker_PastTheBoundTheCheckpointIsMarkedOverflowed(t *testing.T) {
	tr := newTracker(2, nil)
	for _, k := range []string{"a", "b"} {
		tr.finish(tr.begin("s", k, &ckEntry{RV: "1"}), true)
	}
	if st, _ := tr.snapshot(false); st.Overflow || len(st.Scopes["s"]) != 2 {
		t.Fatalf("at the bound: %+v", st)
	}
	tr.finish(tr.begin("s", "c", &ckEntry{RV: "1"}), true)
	st, changed := tr.snapshot(false)
	if !changed || !st.Overflow || len(st.Scopes) != 0 {
		t.Errorf("past the bound: %+v, want an overflowed checkpoint with no objects", st)
	}
	// An overflowed checkpoint restores nothing: the next start treats
	// every scope as new.
	if _, ok := newTracker(2, st).restoredScope("s"); ok {
		t.Error("an overflowed checkpoint restored a scope")
	}
}

func TestFileStore_RoundTripsAndReplacesAtomically(t *testing.T) {
	f := &fileStore{path: filepath.Join(t.TempDir(), "ck")}
	ctx := context.Background()
	if st, err := f.load(ctx); st != nil || err != nil {
		t.Fatalf("load of a missing file = %v, %v; want nothing", st, err)
	}
	want := &ckState{Version: 1, Scopes: map[string]map[string]ckEntry{"configmap@ns": {"ns/a": {UID: "u", RV: "7", Fields: map[string]string{"data": "x"}}}}}
	for range 2 {
		if err := f.save(ctx, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.load(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("load = %+v, %v; want %+v", got, err, want)
	}
	matches, _ := filepath.Glob(f.path + ".tmp-*")
	if len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// The initial list against a restored checkpoint: what is new is created,
// what changed is updated (naming the top-level fields), what vanished is
// deleted, what was replaced is deleted and created, and the rest (also
// a change the update policy drops) is not notified.
func TestSource_InitialListAgainstTheCheckpointIsWhatChangedWhileDown(t *testing.T) {
	s, d, _ := testSource(t, UpdatePolicy{IgnoreMetadataOnly: true})
	first := func(name, uid, rv string, data, labels map[string]string) *ckEntry {
		c := cm(rv, data, labels)
		c.Name, c.UID = name, typesUID(uid)
		return entryOf(uid, rv, s.toMap(c))
	}
	restored := &ckState{Version: 1, Scopes: map[string]map[string]ckEntry{s.scope: {
		"ns/same":     *first("same", "u1", "10", map[string]string{"k": "v"}, nil),
		"ns/changed":  *first("changed", "u2", "11", map[string]string{"k": "v"}, nil),
		"ns/labelled": *first("labelled", "u3", "12", map[string]string{"k": "v"}, nil),
		"ns/replaced": *first("replaced", "u4", "13", nil, nil),
		"ns/gone":     *first("gone", "u5", "14", nil, nil),
	}}}
	s.n.tracker = newTracker(100, restored)
	s.restore()
	add := func(name, uid, rv string, data, labels map[string]string) {
		c := cm(rv, data, labels)
		c.Name, c.UID = name, typesUID(uid)
		s.add(c, true)
	}
	add("same", "u1", "10", map[string]string{"k": "v"}, nil)
	add("changed", "u2", "20", map[string]string{"k": "v2"}, nil)
	add("labelled", "u3", "21", map[string]string{"k": "v"}, map[string]string{"a": "b"})
	add("replaced", "u9", "22", nil, nil)
	add("new", "u6", "23", nil, nil)
	s.sweep()
	var got []string
	for _, ev := range queued(d) {
		got = append(got, string(ev.Type)+" "+ev.Name+" "+ev.UID+" "+fmtChanges(ev.Changes))
	}
	want := []string{"update changed u2 [data]", "delete replaced u4 []", "create replaced u9 []", "create new u6 []", "delete gone u5 []"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%q\nwant\n%q", got, want)
	}
	// Everything seen is in the checkpoint now (d's events are still
	// queued, so their new states wait behind them).
	for _, k := range []string{"ns/same", "ns/labelled"} {
		if _, ok := committed(s.n.tracker, s.scope, k); !ok {
			t.Errorf("%s not recorded", k)
		}
	}
}
