// Command podwatch prints the pods of one namespace as they are added,
// changed and deleted: client-go's workqueue example, built on kloop.
//
//	podwatch [--namespace default] [--kubeconfig PATH] [--master URL] [--workers 1] [flags]
//	podwatch version
//
// It takes kloop's command-line conventions (package cli; see --help):
// the kubeconfig is --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
// else the in-cluster configuration; nothing listens unless
// --metrics-bind-address or --health-probe-bind-address is given. Lines go
// to stdout, logs to stderr. SIGINT or SIGTERM stops it after the sync in
// flight (exit 0); a second signal exits 1 at once.
package main

import (
	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/samples/podwatch"
)

func main() { cli.Main(command()) }

func command() *cobra.Command {
	flags := cli.NewFlags("podwatch")
	flags.Namespaces = []string{podwatch.DefaultNamespace}
	workers := 1
	cmd := &cobra.Command{
		Use:   "podwatch",
		Short: "Print the pods of a namespace as they change (client-go's workqueue example)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, opts, err := flags.Config(cmd)
			if err != nil {
				return err
			}
			return podwatch.Run(cmd.Context(), cfg, opts, podwatch.Options{Workers: workers, Out: cmd.OutOrStdout()})
		},
	}
	fs := cmd.Flags()
	flags.AddFlags(fs)
	fs.IntVar(&workers, "workers", workers, "pods synced at once")
	return cmd
}
