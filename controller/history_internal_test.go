package controller

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/kloop-dev/kloop/cache"
)

func TestHistory_AKeyReconciledOnceKeepsOneRecordAndItsLatestInOrder(t *testing.T) {
	var h history[string]
	at := func(i int) time.Time { return time.Unix(int64(i), 0) }
	h.add(&record[string]{key: "once", start: at(0)})
	for i := range 7 {
		h.add(&record[string]{key: "often", start: at(1 + i)})
	}
	if k := h.keys["once"]; len(k.ring) != 1 || cap(k.ring) != 1 {
		t.Errorf("a key reconciled once keeps %d records in room for %d, want 1 in 1", len(k.ring), cap(k.ring))
	}
	if k := h.keys["often"]; cap(k.ring) != keyHistoryDepth {
		t.Errorf("a key reconciled 7 times has room for %d records, want %d", cap(k.ring), keyHistoryDepth)
	}
	byKey := h.byKey()
	if rs := byKey["often"]; len(rs) != keyHistoryDepth || !rs[0].Time.Equal(at(7)) || !rs[4].Time.Equal(at(3)) {
		t.Errorf("often's reconciles = %v, want the last %d, newest (7s) first", rs, keyHistoryDepth)
	}

	// Enough new keys to forget both: the rings are reused, empty.
	for i := range keyHistoryKeys {
		h.add(&record[string]{key: fmt.Sprint("k", i), start: at(100 + i)})
	}
	if _, ok := h.keys["often"]; ok || len(h.keys) != keyHistoryKeys {
		t.Fatalf("%d keys kept, often among them: %v; want the %d newest", len(h.keys), ok, keyHistoryKeys)
	}
	for i := range 3 {
		h.add(&record[string]{key: "k0", start: at(1000 + i)})
	}
	rs := h.byKey()["k0"]
	if len(rs) != 4 || !rs[0].Time.Equal(at(1002)) || !rs[3].Time.Equal(at(100)) {
		t.Errorf("k0's reconciles = %v, want 4, newest (1002s) first", rs)
	}
	for key, rs := range h.byKey() {
		if key != "k0" && (len(rs) != 1 || rs[0].Key != key) {
			t.Errorf("%s's reconciles = %v, want its one", key, rs)
		}
	}
}

// A key's ring keeps its records compact and gives them back as they were:
// every field, every kept cause, names beyond what the table of names
// holds.
func TestHistory_KeyRecordsComeBackAsTheyWereKept(t *testing.T) {
	if size := unsafe.Sizeof(kept{}); size > 96 {
		t.Errorf("a kept record takes %d bytes, want at most 96", size)
	}
	var h history[string]
	start := time.Date(2026, 12, 7, 18, 0, 0, 123456789, time.UTC)
	var many causeSet
	many.add(Cause{Source: "Owns", Kind: "Deployment", Namespace: "ns", Name: "web", ResourceVersion: "12", Change: cache.Updated, Own: true})
	many.add(Cause{Source: "For", Kind: "Foo", Namespace: "ns", Name: "f", ResourceVersion: "11", Change: cache.Added, Replay: true})
	many.add(Cause{Source: causeRetry})
	many.total = 7
	var one causeSet
	one.add(Cause{Source: "For", Kind: "Foo", Namespace: "ns", Name: "f", ResourceVersion: "13", Change: cache.Deleted})
	recs := []record[string]{
		{key: "f", start: start, dur: 3 * time.Millisecond, outcome: OutcomeError, err: "boom", terminal: true, retries: 4, causes: many},
		{key: "f", start: start.Add(time.Second), outcome: OutcomeSkipped, causes: one},
		{key: "f", start: start.Add(2 * time.Second), dur: time.Nanosecond, outcome: OutcomeSuccess},
	}
	check := func(got Reconcile, r record[string]) {
		t.Helper()
		want := r.reconcile()
		if !got.Time.Equal(want.Time) {
			t.Errorf("%s at %v: kept time %v", r.key, want.Time, got.Time)
		}
		got.Time = want.Time
		if !reflect.DeepEqual(got, want) {
			t.Errorf("kept record of %s:\n got %+v\nwant %+v", r.key, got, want)
		}
	}
	for _, r := range recs {
		h.add(&r)
	}
	for i, r := range recs {
		check(h.byKey()["f"][2-i], r)
	}

	// More sources than the table holds: the names past it are kept in
	// the record's extra.
	recs = recs[:0]
	for i := range 300 {
		var s causeSet
		s.add(Cause{Source: fmt.Sprint("source-", i), Kind: fmt.Sprint("Kind", i)})
		recs = append(recs, record[string]{key: fmt.Sprint("k", i), start: start, outcome: fmt.Sprint("outcome-", i), causes: s})
	}
	for _, r := range recs {
		h.add(&r)
	}
	byKey := h.byKey()
	for i, r := range recs[300-keyHistoryKeys:] {
		k := fmt.Sprint("k", 300-keyHistoryKeys+i)
		if rs := byKey[k]; len(rs) != 1 {
			t.Fatalf("%s has %d records, want 1", k, len(rs))
		}
		check(byKey[k][0], r)
	}
}

// Keeping a reconcile of a key whose ring is full allocates nothing: the
// per-event path pays for no extra unless the record has one.
func TestHistory_AddingToAFullRingAllocatesNothing(t *testing.T) {
	var h history[string]
	var s causeSet
	s.add(Cause{Source: "For", Kind: "Foo", Namespace: "ns", Name: "k", ResourceVersion: "5", Change: cache.Updated})
	r := record[string]{key: "k", start: time.Unix(5, 0), dur: time.Millisecond, outcome: OutcomeSuccess, causes: s}
	for range keyHistoryDepth {
		h.add(&r)
	}
	if allocs := testing.AllocsPerRun(100, func() { h.add(&r) }); allocs != 0 {
		t.Errorf("adding to a full ring: %v allocations, want 0", allocs)
	}
}

// Each worker keeps its own records and its share of the keys; reads
// merge them, newest first, within the same bounds as one history.
func TestHistories_WorkersKeepTheirOwnAndReadsMergeThem(t *testing.T) {
	hs := newHistories[string](2)
	if hs[0].maxKeys != keyHistoryKeys/2 || newHistories[string](64)[0].maxKeys != minShareKeys {
		t.Fatalf("shares of %d keys: %d for 2 workers, %d for 64; want %d and %d",
			keyHistoryKeys, hs[0].maxKeys, newHistories[string](64)[0].maxKeys, keyHistoryKeys/2, minShareKeys)
	}
	at := func(i int) time.Time { return time.Unix(int64(i), 0) }
	for i := range 30 { // worker i%2 reconciles "shared" at i, and a key of its own
		hs[i%2].add(&record[string]{key: "shared", start: at(i)})
		hs[i%2].add(&record[string]{key: fmt.Sprint("own", i%2), start: at(i)})
	}
	recent := hs.list()
	if len(recent) != RecentReconciles || !recent[0].Time.Equal(at(29)) || !recent[RecentReconciles-1].Time.Equal(at(20)) {
		t.Fatalf("recent = %d reconciles from %v to %v; want %d, from 29s down to 20s",
			len(recent), recent[0].Time, recent[len(recent)-1].Time, RecentReconciles)
	}
	byKey := hs.byKey()
	shared := byKey["shared"]
	if len(shared) != keyHistoryDepth {
		t.Fatalf("shared has %d reconciles, want %d", len(shared), keyHistoryDepth)
	}
	for i, r := range shared {
		if want := at(29 - i); !r.Time.Equal(want) {
			t.Errorf("shared's reconcile %d at %v, want %v (both workers', newest first)", i, r.Time, want)
		}
	}
	if len(byKey["own0"]) != keyHistoryDepth || len(byKey["own1"]) != keyHistoryDepth || len(byKey) != 3 {
		t.Errorf("keys kept: %d (own0 %d, own1 %d reconciles); want 3, each worker's own with %d", len(byKey), len(byKey["own0"]), len(byKey["own1"]), keyHistoryDepth)
	}
}
