package testwait

import "github.com/kloop-dev/kloop/testenv/await"

// Changes is await.Changes, for kloop's own tests beside the other waits
// here.
func Changes(t await.TB, ws ...await.Watcher) *await.Signal {
	t.Helper()
	return await.Changes(t, ws...)
}
