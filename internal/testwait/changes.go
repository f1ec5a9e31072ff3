package testwait

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/testenv/await"
)

// Changes returns a Signal notified on every event of a watch opened now on
// each of ws, until the test ends: a change source for await.Until when the
// state a condition reads is spread over several resources. A watch the
// server ends is not reopened; conditions that wait longer than the
// server's watch timeout (minutes) should use await.Watched.
func Changes(t await.TB, ws ...await.Watcher) *await.Signal {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sig := &await.Signal{}
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
