package kloop_test

import (
	"context"
	"log/slog"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv/await"
)

// Run sets Options.MemoryLimit as the process's Go memory limit and logs
// it with the reason; the test puts the limit back.
func TestRun_SetsTheGoMemoryLimitAndSaysWhy(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const limit = 3 << 30
	logs := await.NewLogs()
	app, err := kloop.New(unreachable, kloop.Options{Name: "memlimit", Logger: slog.New(logs), Registry: prometheus.NewRegistry(), MemoryLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "the App", func(ctx context.Context) error { return app.Run(ctx) })
	rec := await.Logged(t, "the memory limit's log line", logs, func(r await.Record) bool { return r.Message == "Go memory limit set" })
	if rec.Attrs["bytes"] != strconv.Itoa(limit) || rec.Attrs["why"] == "" {
		t.Errorf("logged %s, want bytes=%d and why", rec, limit)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("the Go memory limit is %d, want %d", got, limit)
	}
}

// Options.Memory.EncodedUnder compares with the Go memory limit Run sets
// (here Options.MemoryLimit), before Run: the App's informers are made
// first.
func TestNew_MemoryEncodedUnderComparesWithTheLimitRunSets(t *testing.T) {
	for _, c := range []struct {
		limit       int64
		wantEncoded bool
	}{{256 << 20, true}, {4 << 30, false}} {
		app, err := kloop.New(unreachable, kloop.Options{
			Name: "memlimit", Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
			MemoryLimit: c.limit, Memory: informer.Memory{EncodedUnder: 1 << 30},
		})
		if err != nil {
			t.Fatal(err)
		}
		inf, err := informer.Of[*corev1.ConfigMap](app.Factory(), informer.Scope{})
		if err != nil {
			t.Fatal(err)
		}
		if got := inf.Status().Encoded; got != c.wantEncoded {
			t.Errorf("MemoryLimit %d, Memory.EncodedUnder 1 GiB: the informer's cache encoded = %v, want %v", c.limit, got, c.wantEncoded)
		}
	}
}
