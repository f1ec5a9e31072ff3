package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/controller"
)

// A controller retries a failing key with growing delays and reconciles a
// key that asked for it again after RequeueAfter.
func Example() {
	attempts := map[string]int{}
	done := make(chan struct{})
	rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
		attempts[key]++ // one worker, so no locking is needed
		switch {
		case attempts[key] < 3:
			return controller.Result{}, fmt.Errorf("attempt %d of %s failed", attempts[key], key)
		case attempts[key] == 3:
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		fmt.Printf("%s reconciled after %d attempts\n", key, attempts[key])
		close(done)
		return controller.Result{}, nil
	})
	c, err := controller.New(rec, controller.Options[string]{
		Name:       "example",
		Logger:     slog.New(slog.DiscardHandler),
		Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- c.Start(ctx) }()
	c.Enqueue("greeting")
	<-done
	stop()
	fmt.Println("Start returned", <-stopped)
	// Output:
	// greeting reconciled after 4 attempts
	// Start returned <nil>
}
