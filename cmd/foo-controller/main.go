// Command foo-controller runs the Foo controller (samples/foo): for every
// samplecontroller.k8s.io/v1alpha1 Foo it keeps a Deployment of nginx pods
// named spec.deploymentName with spec.replicas replicas, and reports the
// available ones in status.availableReplicas. It is kloop's
// sample-controller:
//
//	foo-controller [--kubeconfig PATH] [--master URL] [--namespace NS[,NS...]] [--workers 2] [flags]
//	foo-controller version
//
// It takes kloop's command-line conventions (package cli; see --help):
// the kubeconfig is --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
// else the in-cluster configuration, and sample-controller's -kubeconfig
// and -master with one dash work too. Nothing listens unless
// --metrics-bind-address or --health-probe-bind-address is given (the
// manifests in deploy/ give :8443 with --metrics-secure, and :8081). It
// waits for the Foo CRD (samples/foo/crd, or sample-controller's crd.yaml
// or crd-status-subresource.yaml; see kloop.Options.WaitForKinds): until it
// is installed, and while it is deleted, the controller holds and
// /readyz?verbose says "waiting for kind Foo". --wait-for-kinds is on by
// default here; --wait-for-kinds=false makes a missing CRD an error. Logs go to stderr. SIGINT or SIGTERM stops
// it after the syncs in flight (exit 0); a second signal exits 1 at once.
package main

import (
	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/samples/foo"
)

func main() { cli.Main(command()) }

func command() *cobra.Command {
	flags, workers := cli.NewFlags(foo.ControllerName), foo.DefaultWorkers
	flags.WaitForKinds = true // the default here: --wait-for-kinds=false fails at once without the CRD
	cmd := &cobra.Command{
		Use:   "foo-controller",
		Short: "Keep a Deployment for every Foo (kloop's sample-controller)",
		Long: "foo-controller keeps, for every samplecontroller.k8s.io/v1alpha1 Foo, a Deployment named\n" +
			"spec.deploymentName with spec.replicas nginx pods, and reports the available ones in\n" +
			"status.availableReplicas. It waits for the Foo CRD while it is not installed.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, opts, err := flags.Config(cmd)
			if err != nil {
				return err
			}
			opts.Scheme = foo.Scheme()
			return kloop.Run(cmd.Context(), cfg, opts, func(app *kloop.App) error { return foo.Setup(app, workers) })
		},
	}
	fs := cmd.Flags()
	flags.AddFlags(fs)
	fs.IntVar(&workers, "workers", workers, "Foos synced at once")
	return cmd
}
