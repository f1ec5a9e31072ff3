package kloop_test

import (
	"context"
	"log/slog"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop"
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
