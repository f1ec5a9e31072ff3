// Command notifier sends a notification for every change to the
// Kubernetes objects named in a kubewatch config file: kubewatch, built on
// kloop.
//
//	notifier [--config PATH] [--kubeconfig PATH] [--drain-timeout 10s] [flags]
//	notifier config sample            print an annotated sample config
//	notifier config check [--config]  parse the config and print what it watches and where it sends
//	notifier config rbac [--config] [--name notifier]  print the ClusterRole the config needs
//	notifier config add <handler> [flags]  configure one of kubewatch's ten handlers in the file
//	notifier config view              print the config file
//	notifier config test              send kubewatch's test event to every handler; exit 1 naming those that failed
//	notifier resource add|remove --po --cm ...  turn resources on or off in the file
//	notifier version
//
// The config is read from --config, else $KW_CONFIG/.kubewatch.yaml, else
// $HOME/.kubewatch.yaml; kubewatch's environment variables (KW_POD=true,
// KW_WEBHOOK_URL, ...) apply on top. The rest are kloop's command-line
// conventions (package cli; see --help): the kubeconfig is --kubeconfig,
// else $KUBECONFIG, else ~/.kube/config, else the in-cluster
// configuration. As kubewatch, it serves /metrics on
// --metrics-bind-address, default $LISTEN_ADDRESS, else :2112 (over TLS
// to authorized callers with --metrics-secure); /healthz and /readyz on
// --health-probe-bind-address, else with /metrics. kubewatch's LOG_LEVEL (trace, debug, info, warning,
// error) and LOG_FORMATTER=json set the defaults of --log-level and
// --log-format. Logs go to stderr; log sinks write to stdout.
//
// SIGINT or SIGTERM stops it: it takes no new events, delivers what its
// sinks have queued for at most --drain-timeout, and exits 0. A second
// signal exits 1 at once.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/internal/notifier"
	"github.com/kloop-dev/kloop/manager"
)

func main() {
	ctx, stop := manager.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	return cli.Run(ctx, command(lookupEnv), args, stdout, stderr)
}

func command(lookupEnv func(string) (string, bool)) *cobra.Command {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	flags := cli.NewFlags("notifier")
	if addr := getenv("LISTEN_ADDRESS"); addr != "" {
		flags.Serving.MetricsAddr = addr
	} else {
		flags.Serving.MetricsAddr = ":2112"
	}
	envErr := kubewatchLogEnv(&flags.Logging, getenv)
	var configPath string
	drain := notifier.DefaultDrainTimeout
	cmd := &cobra.Command{
		Use:   "notifier",
		Short: "Send a notification for every change to the objects a kubewatch config names",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return envErr
			}
			if drain <= 0 {
				// The library would take it as "the default", not as "no drain".
				return &cli.FlagError{Flag: "--drain-timeout", Value: drain.String(), Want: "want a positive duration"}
			}
			if err := flags.Validate(); err != nil {
				return err
			}
			// The config before the cluster: a missing file is the
			// likelier mistake, and its error has a hint.
			cfg, err := loadConfig(configPath, lookupEnv, getenv)
			if err != nil {
				return fmt.Errorf("loading the config: %w", err)
			}
			restCfg, opts, err := flags.Config(cmd)
			if err != nil {
				return err
			}
			if opts.Namespace == "" && len(opts.Namespaces) == 0 { // --namespace wins over the config's
				opts.Namespace = cfg.Namespace
			}
			opts.ShutdownTimeout = drain + 20*time.Second
			app, err := kloop.New(restCfg, opts)
			if err != nil {
				return err
			}
			if _, err := notifier.New(app, *cfg, notifier.Options{Out: cmd.OutOrStdout(), DrainTimeout: drain, RESTConfig: restCfg}); err != nil {
				return err
			}
			return app.Run(cmd.Context())
		},
	}
	cmd.PersistentFlags().StringVar(&configPath, "config", "", "config file (default $KW_CONFIG/.kubewatch.yaml, else $HOME/.kubewatch.yaml)")
	fs := cmd.Flags()
	flags.AddFlags(fs)
	fs.DurationVar(&drain, "drain-timeout", drain, "on SIGINT/SIGTERM, deliver queued notifications for at most this long")
	cmd.AddCommand(configCommand(&configPath, lookupEnv, getenv), resourceCommand(&configPath, getenv))
	return cmd
}

// kubewatchLogEnv turns kubewatch's LOG_LEVEL and LOG_FORMATTER into the
// defaults of --log-level and --log-format.
func kubewatchLogEnv(l *cli.Logging, getenv func(string) string) error {
	switch v := strings.ToLower(getenv("LOG_LEVEL")); v {
	case "":
	case "trace", "debug":
		l.Level = "debug"
	case "info":
		l.Level = "info"
	case "warn", "warning":
		l.Level = "warn"
	case "error", "fatal", "panic":
		l.Level = "error"
	default:
		return cli.Usagef("LOG_LEVEL=%q: want trace, debug, info, warning or error", v)
	}
	switch f := getenv("LOG_FORMATTER"); f {
	case "":
	case "json", "text":
		l.Format = f
	default:
		return cli.Usagef("LOG_FORMATTER=%q: want json or text", f)
	}
	return nil
}

// loadConfig reads path, or the default path with a hint when it is
// missing (kubewatch created an empty file there and watched nothing).
func loadConfig(path string, lookupEnv func(string) (string, bool), getenv func(string) string) (*notifier.Config, error) {
	explicit := path != ""
	if !explicit {
		path = notifier.DefaultConfigPath(getenv)
	}
	cfg, err := notifier.LoadConfig(path, lookupEnv)
	if err != nil && !explicit && errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (write one with: notifier config sample > %s)", err, path)
	}
	return cfg, err
}

func configCommand(configPath *string, lookupEnv func(string) (string, bool), getenv func(string) string) *cobra.Command {
	cfg := &cobra.Command{
		Use:   "config",
		Short: "Write, print, test or check the config",
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("give a subcommand: notifier config add <handler> | view | sample | test | check | rbac")
		},
	}
	cfg.AddCommand(&cobra.Command{
		Use:   "sample",
		Short: "Print an annotated sample config",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), notifier.SampleConfig)
			return err
		},
	}, &cobra.Command{
		Use:   "check",
		Short: "Parse the config and print what it watches, where it sends, and a warning for each key it ignores as kubewatch does",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(*configPath, lookupEnv, getenv)
			if err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			ns := cfg.Namespace
			if ns == "" {
				ns = "(all)"
			}
			fmt.Fprintf(stdout, "namespace: %s\nresources: %s\n", ns, strings.Join(cfg.Resources, ", "))
			for _, cr := range cfg.CustomResources {
				fmt.Fprintf(stdout, "custom resource: %s/%s %s\n", cr.Group, cr.Version, cr.Resource)
			}
			for _, s := range cfg.Sinks {
				// Only the host: a Slack webhook URL's path is its secret.
				where := ""
				if u, err := url.Parse(s.URL); err == nil && u.Host != "" {
					where = " " + u.Scheme + "://" + u.Host + "/..."
				}
				fmt.Fprintf(stdout, "sink %s: %s%s (max %d attempts, queue %d)\n", s.Name, s.Type, where, s.MaxAttempts, s.QueueSize)
			}
			// Routes, incidents and silences.
			for _, l := range cfg.Routing() {
				fmt.Fprintln(stdout, l)
			}
			// What kubewatch would ignore too: accepted, and said.
			for _, w := range cfg.Warnings {
				fmt.Fprintf(stdout, "warning: %s\n", w)
			}
			return nil
		},
	})
	rbac := &cobra.Command{
		Use:   "rbac",
		Short: "Print the RBAC the config needs: list and watch on exactly its kinds, and its checkpoint's ConfigMap",
	}
	name := rbac.Flags().String("name", "notifier", "name of the ClusterRole")
	rbac.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(*configPath, lookupEnv, getenv)
		if err != nil {
			return err
		}
		objs := []any{notifier.ClusterRole(*name, cfg)}
		if r := notifier.CheckpointRole(*name+"-checkpoint", cfg); r != nil {
			objs = append(objs, r)
		}
		w := cmd.OutOrStdout()
		fmt.Fprint(w, "# The RBAC of the notifier's config, written by `notifier config rbac`: a read-only\n# ClusterRole for the kinds it watches, and a Role for its checkpoint ConfigMap.\n")
		for _, o := range objs {
			out, err := yaml.Marshal(o)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "---\n%s", bytes.ReplaceAll(out, []byte("  creationTimestamp: null\n"), nil)); err != nil {
				return err
			}
		}
		return nil
	}
	cfg.AddCommand(rbac, configAddCommand(configPath, getenv), configViewCommand(configPath, getenv), configTestCommand(configPath, lookupEnv, getenv))
	return cfg
}
