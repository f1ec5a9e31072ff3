package leaderelection_test

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/leaderelection"
)

// Run a controller only in the replica that leads; exit when leadership is
// lost so that the process restarts as a candidate.
func Example() {
	var cfg *rest.Config // from a kubeconfig or in-cluster
	run := func(ctx context.Context) error {
		e, err := leaderelection.New(cfg, leaderelection.Config{
			Namespace: "kube-system",
			Name:      "example-controller",
			OnStartedLeading: func(ctx context.Context) error {
				// Start informers and controllers here; return when ctx is done.
				<-ctx.Done()
				return nil
			},
			OnNewLeader: func(id string) { slog.Info("leader", "identity", id) },
		})
		if err != nil {
			return err
		}
		return e.Run(ctx)
	}
	if err := run(context.Background()); errors.Is(err, leaderelection.ErrLeadershipLost) {
		os.Exit(1)
	}
}
