package controller

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/cache"
)

func TestReconcileLogger_PutsTheCallsAttributesBeforeTheRecordsAndOutsideGroups(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, nil)).With("controller", "c")
	log := reconcileLogger(base, cache.Key{Namespace: "ns", Name: "a"})
	log.Debug("below the level: not logged")
	log.Info("plain", "y", 2)
	log.WithGroup("g").Info("grouped", "x", 1)
	log.With("z", 3).Info("with")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (the Debug one not logged):\n%s", len(lines), buf.String())
	}
	if i, j := strings.Index(lines[0], `"reconcileID"`), strings.Index(lines[0], `"y"`); i < 0 || j < i {
		t.Errorf("the call's attributes do not come before the record's: %s", lines[0])
	}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		for k, want := range map[string]string{"controller": "c", "key": "ns/a", "namespace": "ns", "name": "a"} {
			if rec[k] != want {
				t.Errorf("line %d has %s=%v at the top level, want %q: %s", i, k, rec[k], want, line)
			}
		}
		if id, _ := rec["reconcileID"].(string); id == "" {
			t.Errorf("line %d has no reconcileID: %s", i, line)
		}
		if i == 1 {
			g, _ := rec["g"].(map[string]any)
			if len(g) != 1 || g["x"] != float64(1) {
				t.Errorf("group g = %v, want only x=1 in it: %s", g, line)
			}
		}
	}
}

// A key that is neither a cache.Key nor a Stringer is logged as itself.
func TestReconcileLogger_LogsOtherKeysAsThemselves(t *testing.T) {
	var buf bytes.Buffer
	reconcileLogger(slog.New(slog.NewJSONHandler(&buf, nil)), 42).Info("n")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["key"] != float64(42) {
		t.Errorf("key = %v, want 42: %s", rec["key"], buf.String())
	}
}

func TestReconcileLogger_DebugLinesCarryTheCausesAlsoFromDerivedLoggers(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var causes causeSet
	causes.add(Cause{Source: "For", Kind: "Foo", Namespace: "ns", Name: "a", ResourceVersion: "7", Change: cache.Updated, Own: true})
	log := &newReconcileHandler(base, "k", causes).logger
	log.Debug("direct")
	log.With("x", 1).Debug("derived")
	log.With("x", 1).Info("info")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	const want = `causes="For Foo ns/a@7 Updated (own)"`
	if !strings.Contains(lines[0], want) || !strings.Contains(lines[1], want) {
		t.Errorf("Debug lines without %s:\n%s", want, buf.String())
	}
	if strings.Contains(lines[2], "causes=") {
		t.Errorf("an Info line carries the causes: %s", lines[2])
	}
}

// The reconcileID is drawn when a record first needs it; records logged at
// once from goroutines of one call still agree on it.
func TestReconcileLogger_DrawsTheIDOnceForRecordsLoggedAtOnce(t *testing.T) {
	h := newReconcileHandler(slog.New(slog.DiscardHandler), "k", causeSet{})
	if h.id.Load() != 0 {
		t.Fatal("the id was drawn before anything was logged")
	}
	ids := make(chan uint64, 2)
	for range 2 {
		go func() { ids <- h.reconcileID() }()
	}
	a, b := <-ids, <-ids
	if a == 0 || a != b || h.reconcileID() != a {
		t.Fatalf("ids %d and %d (then %d): want one non-zero id for the call", a, b, h.reconcileID())
	}
}
