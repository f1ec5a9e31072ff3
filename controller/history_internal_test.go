package controller

import (
	"fmt"
	"testing"
	"time"
)

func TestHistory_AKeyReconciledOnceKeepsOneRecordAndItsLatestInOrder(t *testing.T) {
	var h history[string]
	at := func(i int) time.Time { return time.Unix(int64(i), 0) }
	h.add(record[string]{key: "once", start: at(0)})
	for i := range 7 {
		h.add(record[string]{key: "often", start: at(1 + i)})
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
		h.add(record[string]{key: fmt.Sprint("k", i), start: at(100 + i)})
	}
	if _, ok := h.keys["often"]; ok || len(h.keys) != keyHistoryKeys {
		t.Fatalf("%d keys kept, often among them: %v; want the %d newest", len(h.keys), ok, keyHistoryKeys)
	}
	for i := range 3 {
		h.add(record[string]{key: "k0", start: at(1000 + i)})
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
