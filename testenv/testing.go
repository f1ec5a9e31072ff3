package testenv

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"testing"
)

// DetectMutations switches the cache's mutation detector on, through
// cache.MutationDetectorEnv, for the stores the test binary creates and for
// the processes its tests start (a re-executed test binary, a command under
// test), so that code that modifies a cached object fails its tests.
// Shared.Main calls it; a TestMain that does without Shared calls it first.
// (testenv does not import cache, whose tests use testenv.)
func DetectMutations() {
	_ = os.Setenv(MutationDetectorEnv, "1")
}

// MutationDetectorEnv is cache.MutationDetectorEnv, which testenv cannot
// import; a cache test checks that the two agree.
const MutationDetectorEnv = "KLOOP_CACHE_MUTATION_DETECTOR"

// ErrShort is returned by Start in a test binary run with -short: the short
// tier is the unit tests, and a control plane is what makes a test an
// end-to-end one. StartT and Shared.Env skip the test instead.
var ErrShort = errors.New("testenv: no control plane under go test -short (an end-to-end test must skip there)")

// underShort reports whether this is a test binary whose flags, parsed
// already, include -short. Outside tests (commands, benchmarks) it is false.
func underShort() bool { return testing.Testing() && flag.Parsed() && testing.Short() }

// StartT starts an Env for a test and stops it in t.Cleanup. When the test
// has failed by then, the tail of every process log is written to the test
// log first. A start error fails the test at once. Under -short it skips the
// test: no control plane starts in the short tier.
func StartT(t testing.TB, opts Options) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (not started with -short)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	}
	e, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", e.logTails(30))
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
