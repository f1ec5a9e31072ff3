package testenv

import (
	"context"
	"log/slog"
	"testing"
)

// StartT starts an Env for a test and stops it in t.Cleanup. When the test
// has failed by then, the tail of every process log is written to the test
// log first. A start error fails the test at once.
func StartT(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	}
	e, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", e.LogTails(30))
		}
		e.Stop()
	})
	return e
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
