// Command cronjob-controller runs the CronJob controller (samples/cronjob),
// the kubebuilder book's: for every batch.tutorial.kubebuilder.io CronJob
// it creates a Job at each scheduled run, reports the active ones and the
// last schedule time in the status, keeps the history limits of finished
// Jobs, and deletes a CronJob's Jobs before the CronJob goes. It serves the
// CronJob webhooks (defaulting, validation, v1/v2 conversion) when a
// webhook address or local mode is given:
//
//	cronjob-controller [--kubeconfig PATH] [--namespace NS[,NS...]] [--workers 2] [--webhook-bind-address :9443 (--webhook-cert-dir DIR | --webhook-self-signed-secret NAME) | --webhook-local] [flags]
//	cronjob-controller version
//
// It takes kloop's command-line conventions (package cli; see --help). The
// CronJob CRD must be installed (samples/cronjob/crd). With --webhook-local
// (a controller run outside the cluster) it installs its webhook
// configurations and the CRD's conversion while it runs, pointing at
// itself, and removes them when it stops. Logs go to stderr. SIGINT or
// SIGTERM stops it after the syncs in flight (exit 0).
package main

import (
	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/samples/cronjob"
)

func main() { cli.Main(command()) }

func command() *cobra.Command {
	flags := cli.NewFlags(cronjob.ControllerName)
	o := cronjob.Options{Workers: cronjob.DefaultWorkers}
	cmd := &cobra.Command{
		Use:   "cronjob-controller",
		Short: "Run a Job at each scheduled time of every CronJob (the kubebuilder book's)",
		Long: "cronjob-controller creates, for every batch.tutorial.kubebuilder.io CronJob, a Job at each\n" +
			"scheduled run, keeps the history limits, and reports the active Jobs and the last schedule\n" +
			"time. With a webhook address (or --webhook-local) it also serves the CronJob's defaulting,\n" +
			"validation and v1/v2 conversion webhooks. The CronJob CRD must be installed.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, opts, err := flags.Config(cmd)
			if err != nil {
				return err
			}
			opts.Scheme = cronjob.Scheme()
			return kloop.Run(cmd.Context(), cfg, opts, func(app *kloop.App) error { return cronjob.Setup(app, o) })
		},
	}
	fs := cmd.Flags()
	flags.AddFlags(fs)
	fs.IntVar(&o.Workers, "workers", o.Workers, "CronJobs synced at once")
	return cmd
}
