package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/workqueue"
)

// A controller's worker loop: take a key, process it, report Done. Keys added
// while they wait are processed once; a failed key comes back rate-limited.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := workqueue.New(workqueue.Options[string]{})

	// Event handlers add keys; the second add of "default/a" is merged.
	q.Add("default/a")
	q.Add("default/b")
	q.Add("default/a")
	q.AddWithPriority("default/urgent", 10)

	var (
		mu       sync.Mutex
		attempts = map[string]int{}
	)
	reconcile := func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		attempts[key]++
		if key == "default/b" && attempts[key] == 1 {
			return errors.New("conflict")
		}
		fmt.Println("reconciled", key)
		return nil
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			key, err := q.Get(ctx)
			if err != nil {
				return // workqueue.ErrShutDown: nothing left (or ctx ended)
			}
			if err := reconcile(key); err != nil {
				q.AddRateLimited(key) // retried after 5 ms, then 10 ms, ...
			} else {
				q.Forget(key)
			}
			q.Done(key)
			if key == "default/b" && q.NumRequeues(key) == 0 {
				q.ShutDown() // demo over: hand out what is left, then stop
			}
		}
	})
	wg.Wait()
	// Output:
	// reconciled default/urgent
	// reconciled default/a
	// reconciled default/b
}
