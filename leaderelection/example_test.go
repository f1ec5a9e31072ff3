package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/leaderelection"
)

// Run a controller only in the replica that leads; exit when leadership is
// lost so that the process restarts as a candidate.
func Example() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	e, err := leaderelection.New(cfg, leaderelection.Options{
		Namespace:        "default",
		Name:             "example-controller",
		Identity:         "replica-1", // default: the host name
		OnStoppedLeading: func() { fmt.Println("stopped leading; the lease is released") },
		Logger:           slog.New(slog.DiscardHandler),
		Registerer:       prometheus.NewRegistry(),
	})
	if err != nil {
		panic(err)
	}
	err = e.Run(ctx, func(ctx context.Context) error {
		fmt.Println("leading: starting informers and controllers")
		stop() // here, a signal to stop; they would run until ctx is done
		<-ctx.Done()
		return nil
	})
	if errors.Is(err, leaderelection.ErrLeadershipLost) {
		os.Exit(1)
	}
	fmt.Println("Run returned", err)
	// Output:
	// leading: starting informers and controllers
	// stopped leading; the lease is released
	// Run returned <nil>
}
