package await

import (
	"context"
	"time"
)

// Run runs fn in a goroutine until the test ends: then it cancels fn's
// context and waits up to Timeout for fn to return. It fails t, naming
// what, if fn returns an error (after the stop or before it) or does not
// return in time. For the Start or Run of whatever a test keeps running in
// the background: a factory, a controller, an App.
func Run(t TB, what string, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		timer := time.NewTimer(Timeout)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s returned %v, want nil after the stop", what, err)
			}
		case <-timer.C:
			t.Errorf("%s did not return within %v of the stop", what, Timeout)
		}
	})
}

// Closed waits up to Timeout for ch to be closed (or to receive). It fails
// t, naming what, if that does not happen in time.
func Closed[V any](t TB, what string, ch <-chan V) {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("waiting for %s: not within %v", what, Timeout)
	case <-t.Context().Done():
		t.Fatalf("waiting for %s: %v", what, context.Cause(t.Context()))
	}
}

// Receive waits up to Timeout for a value from ch and returns it, such as
// the error of a Run the test stopped. It fails t, naming what, if none
// comes in time or ch is closed.
func Receive[V any](t TB, what string, ch <-chan V) V {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("waiting for %s: nothing within %v", what, Timeout)
	case <-t.Context().Done():
		t.Fatalf("waiting for %s: %v", what, context.Cause(t.Context()))
	}
	var zero V
	return zero
}
