package await

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Changes returns a Signal notified on every event of a watch opened now on
// each of ws, until the test ends: the change source of Until when the
// state a condition reads is spread over several resources (nodes, leases
// and pods, say). A watch the server ends is not opened again, so a
// condition that may wait longer than the server's watch timeout (minutes)
// should use Watched.
func Changes(t TB, ws ...Watcher) *Signal {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sig := &Signal{}
	var wg sync.WaitGroup
	for _, w := range ws {
		wi, err := w.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("watch for changes: %v", err)
		}
		wg.Go(func() {
			defer wi.Stop()
			for {
				select {
				case _, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					sig.Notify()
				case <-ctx.Done():
					return
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return sig
}
