package controller_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kloop-dev/kloop/controller"
)

// Restrict stops handing out the keys it rejects, waits for their
// reconciles in flight (and only those), and admits them again when
// widened.
func TestController_Restrict_DropsRejectedKeysAndWaitsForTheirReconcilesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls []string
		)
		release := map[string]chan struct{}{"a1": make(chan struct{}), "b1": make(chan struct{})}
		entered := make(chan string, 4)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			calls = append(calls, key)
			mu.Unlock()
			entered <- key
			if ch, ok := release[key]; ok {
				<-ch
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{Workers: 2})
		defer h.shutdown()

		var onlyB atomic.Bool
		admit := func(k string) bool { return !onlyB.Load() || strings.HasPrefix(k, "b") }
		if err := h.c.Restrict(t.Context(), admit); err != nil {
			t.Fatal(err)
		}
		// One at a time, so that the calls are in a known order.
		h.c.Enqueue("a1")
		<-entered
		h.c.Enqueue("b1")
		<-entered

		// Now only b keys: Restrict waits for a1 (in flight), not for b1.
		onlyB.Store(true)
		restricted := make(chan error, 1)
		go func() { restricted <- h.c.Restrict(t.Context(), admit) }()
		synctest.Wait()
		select {
		case err := <-restricted:
			t.Fatalf("Restrict returned %v while a1 was in flight", err)
		default:
		}
		h.c.Enqueue("a2") // rejected: dropped unreconciled
		time.Sleep(time.Second)
		close(release["a1"])
		if err := <-restricted; err != nil {
			t.Fatal(err)
		}
		close(release["b1"])
		h.c.Enqueue("b2")
		if got := <-entered; got != "b2" {
			t.Fatalf("reconciled %s, want b2", got)
		}

		// Widened again: a keys are reconciled.
		onlyB.Store(false)
		h.c.Enqueue("a3")
		<-entered
		synctest.Wait()
		mu.Lock()
		got := strings.Join(calls, ",")
		mu.Unlock()
		if got != "a1,b1,b2,a3" {
			t.Errorf("reconciled %s, want a1,b1,b2,a3 (a2 dropped while restricted)", got)
		}
		if n := h.counter("kloop_controller_keys_not_admitted_total", "controller", "test"); n != 1 {
			t.Errorf("keys not admitted = %v, want 1", n)
		}
	})
}

func TestController_Restrict_GivesUpWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		entered := make(chan struct{})
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			close(entered)
			<-block
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{})
		defer h.shutdown()
		h.c.Enqueue("a")
		<-entered
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := h.c.Restrict(ctx, func(string) bool { return false })
		if err != context.DeadlineExceeded {
			t.Fatalf("Restrict = %v, want the context's deadline", err)
		}
		close(block)
	})
}
