package testwait

import (
	"context"

	"github.com/kloop-dev/kloop/testenv/await"
)

// Run is await.Run, for kloop's own tests beside the other waits here.
func Run(t await.TB, what string, fn func(ctx context.Context) error) {
	t.Helper()
	await.Run(t, what, fn)
}

// Closed is await.Closed, for kloop's own tests beside the other waits here.
func Closed[V any](t await.TB, what string, ch <-chan V) {
	t.Helper()
	await.Closed(t, what, ch)
}
