package testwait

import (
	"context"
	"time"

	"github.com/kloop-dev/kloop/testenv/await"
)

// Receive waits up to await.Timeout for a value from ch and returns it. It fails
// t, naming what, if none comes in time or ch is closed.
func Receive[V any](t await.TB, what string, ch <-chan V) V {
	t.Helper()
	timer := time.NewTimer(await.Timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("waiting for %s: nothing within %v", what, await.Timeout)
	case <-t.Context().Done():
		t.Fatalf("waiting for %s: %v", what, context.Cause(t.Context()))
	}
	panic("unreachable")
}
