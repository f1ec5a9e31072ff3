package testwait

import "github.com/kloop-dev/kloop/testenv/await"

// Receive is await.Receive, for kloop's own tests beside the other waits
// here.
func Receive[V any](t await.TB, what string, ch <-chan V) V {
	t.Helper()
	return await.Receive(t, what, ch)
}
