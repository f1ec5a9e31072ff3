package testwait

import (
	"context"
	"time"

	"github.com/kloop-dev/kloop/testenv/await"
)

// Run runs fn in a goroutine until the test ends: then it cancels fn's
// context and waits up to await.Timeout for fn to return. It fails t, naming
// what, if fn returns an error (after the stop or before it) or does not
// return in time. For the Start or Run of whatever a test keeps running in
// the background: a factory, a controller, an App.
func Run(t await.TB, what string, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		timer := time.NewTimer(await.Timeout)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s returned %v, want nil after the stop", what, err)
			}
		case <-timer.C:
			t.Errorf("%s did not return within %v of the stop", what, await.Timeout)
		}
	})
}
