package informer

import (
	"context"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/watcher"
)

// Memory.EncodedUnder switches the cache to encoded when the memory budget
// is under it, and only then: reads then decode a new object each time.
// New says which cache it chose and why.
func TestMemory_EncodedUnderSwitchesToTheEncodedCacheWhenTheBudgetIsShort(t *testing.T) {
	for _, c := range []struct {
		name        string
		mem         Memory
		wantEncoded bool
		wantWhy     string // in Status().CacheWhy
	}{
		{"budget short", Memory{EncodedUnder: 1 << 30, Budget: 256 << 20}, true, "268435456 bytes (Memory.Budget) is under Memory.EncodedUnder"},
		{"budget enough", Memory{EncodedUnder: 1 << 30, Budget: 2 << 30}, false, "is not under Memory.EncodedUnder"},
		{"not asked", Memory{Budget: 256 << 20}, false, ""},
		{"chosen", Memory{Encoded: true}, true, "Memory.Encoded is set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, Options[*corev1.ConfigMap]{Memory: c.mem})
				defer h.stop()
				h.src.relist("1", cm("a", "ua", "1"))
				synctest.Wait()
				st := h.inf.Status()
				if st.Encoded != c.wantEncoded {
					t.Errorf("Status().Encoded = %v, want %v", st.Encoded, c.wantEncoded)
				}
				if c.wantWhy == "" && st.CacheWhy != "" || !strings.Contains(st.CacheWhy, c.wantWhy) {
					t.Errorf("Status().CacheWhy = %q, want it to contain %q", st.CacheWhy, c.wantWhy)
				}
				a1, ok1 := h.inf.Lister().Get("ns", "a")
				a2, ok2 := h.inf.Lister().Get("ns", "a")
				if !ok1 || !ok2 || a1.ResourceVersion != "1" {
					t.Fatalf("Get(ns/a) = %v %v, want the cached object", a1, ok1)
				}
				if decodedAgain := a1 != a2; decodedAgain != c.wantEncoded {
					t.Errorf("two Gets returned distinct objects: %v, want %v (an encoded cache decodes each read)", decodedAgain, c.wantEncoded)
				}
				logged := strings.Contains(h.logs.String(), "informer cache chosen")
				if want := c.mem.EncodedUnder > 0; logged != want {
					t.Errorf("logged the choice: %v, want %v; logs:\n%s", logged, want, h.logs.String())
				}
			})
		})
	}
}

// Without Budget the budget is the Go memory limit, when one is set.
func TestMemory_EncodedUnderReadsTheGoMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(512 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	logs := await.NewLogs()
	inf, err := New[*corev1.ConfigMap](newFakeSource(), Options[*corev1.ConfigMap]{
		Memory: Memory{EncodedUnder: 1 << 30}, Logger: slog.New(logs), Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !inf.Status().Encoded {
		t.Error("the informer kept the decoded cache under a Go memory limit of 512 MiB, EncodedUnder 1 GiB")
	}
	rec := await.Logged(t, "the cache's choice", logs, func(r await.Record) bool { return r.Message == "informer cache chosen" })
	if !strings.Contains(rec.Attrs["why"], "536870912 bytes (the Go memory limit)") {
		t.Errorf("logged %s, want the why to name the Go memory limit and its bytes", rec)
	}
}

// A type that cannot be encoded (no protobuf) keeps the decoded cache under
// EncodedUnder, and the log says why; Encoded itself is an error there.
func TestMemory_EncodedUnderKeepsTheDecodedCacheForATypeWithoutProtobuf(t *testing.T) {
	logs := await.NewLogs()
	inf, err := New[*unstructured.Unstructured](idleSource[*unstructured.Unstructured]{}, Options[*unstructured.Unstructured]{
		Memory: Memory{EncodedUnder: 1 << 30, Budget: 1 << 20}, Logger: slog.New(logs), Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if inf.Status().Encoded {
		t.Error("an Unstructured informer reports an encoded cache")
	}
	rec := await.Logged(t, "the cache's choice", logs, func(r await.Record) bool { return r.Message == "informer cache chosen" })
	if !strings.Contains(rec.Attrs["why"], "but the decoded cache") || !strings.Contains(rec.Attrs["why"], "protobuf") {
		t.Errorf("logged %s, want the why to say the type has no protobuf", rec)
	}
	if _, err := New[*unstructured.Unstructured](idleSource[*unstructured.Unstructured]{}, Options[*unstructured.Unstructured]{
		Memory: Memory{Encoded: true}, Registerer: prometheus.NewRegistry(),
	}); err == nil || !strings.Contains(err.Error(), "protobuf") {
		t.Errorf("New with Memory.Encoded for Unstructured: %v, want an error about protobuf", err)
	}
}

// idleSource emits nothing.
type idleSource[T watcher.Object] struct{}

func (idleSource[T]) Run(ctx context.Context, _ func(watcher.Event[T])) error {
	<-ctx.Done()
	return nil
}

func (idleSource[T]) LastError() error { return nil }
