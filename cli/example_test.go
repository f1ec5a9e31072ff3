package cli_test

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
)

// A controller command: the conventional flags, one flag of its own, and
// the one call that turns them into what kloop.New takes. Its main would
// be cli.Main(cmd).
func Example() {
	flags := cli.NewFlags("hello-controller")
	workers := 2
	cmd := &cobra.Command{
		Use:   "hello-controller",
		Short: "Say hello to every ConfigMap",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, opts, err := flags.Config(cmd)
			if err != nil {
				return err
			}
			app, err := kloop.New(cfg, opts)
			if err != nil {
				return err
			}
			_ = app // declare the controllers (with workers), then: return app.Run(cmd.Context())
			fmt.Printf("server %s, qps %v, lease %s/%s, metrics %q, health %q, workers %d\n",
				cfg.Host, cfg.QPS, opts.LeaderElection.Namespace, opts.LeaderElection.ID, opts.MetricsAddr, opts.HealthAddr, workers)
			return nil
		},
	}
	flags.AddFlags(cmd.Flags())
	cmd.Flags().IntVar(&workers, "workers", workers, "ConfigMaps greeted at once")

	code := cli.Run(context.Background(), cmd, []string{
		"-master", "https://127.0.0.1:6443", // sample-controller's single dash works too
		"--leader-elect", "--leader-elect-namespace", "kube-system",
		"--metrics-bind-address", ":8080",
		"--workers", "4",
	}, os.Stdout, os.Stderr)
	fmt.Println("exit", code)
	// Output:
	// server https://127.0.0.1:6443, qps -1, lease kube-system/hello-controller-leader, metrics ":8080", health "", workers 4
	// exit 0
}
