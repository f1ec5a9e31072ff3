// Command notifier sends a notification for every change to the
// Kubernetes objects named in a kubewatch config file: kubewatch, built on
// kloop.
//
//	notifier [--config PATH] [--kubeconfig PATH] [--master URL] [--http-addr ADDR] [--drain-timeout 10s]
//	notifier config sample            print an annotated sample config
//	notifier config check [--config]  parse the config and print what it watches and where it sends
//	notifier config rbac [--config] [--name notifier]  print the read-only ClusterRole the config needs
//
// The config is read from --config, else $KW_CONFIG/.kubewatch.yaml, else
// $HOME/.kubewatch.yaml; kubewatch's environment variables (KW_POD=true,
// KW_WEBHOOK_URL, ...) apply on top. Without --kubeconfig and --master it
// uses the in-cluster configuration, else $KUBECONFIG or ~/.kube/config.
// /metrics, /healthz and /readyz are served on --http-addr (default
// $LISTEN_ADDRESS, else :2112, as kubewatch). LOG_LEVEL (debug, info,
// warning, error) and LOG_FORMATTER=json set the logs, which go to stderr;
// log sinks write to stdout.
//
// SIGINT or SIGTERM stops it: it takes no new events, delivers what its
// sinks have queued for at most --drain-timeout, and exits 0. A second
// signal exits 1 at once.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/notifier"
)

func main() {
	ctx, stop := manager.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	if len(args) > 0 && args[0] == "config" {
		return configCmd(args[1:], stdout, stderr, lookupEnv, getenv)
	}
	fs := flag.NewFlagSet("notifier", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file (default $KW_CONFIG/.kubewatch.yaml, else $HOME/.kubewatch.yaml)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means in-cluster, else $KUBECONFIG or ~/.kube/config")
	master := fs.String("master", "", "address of the API server; overrides the kubeconfig's")
	defaultAddr := getenv("LISTEN_ADDRESS")
	if defaultAddr == "" {
		defaultAddr = ":2112"
	}
	httpAddr := fs.String("http-addr", defaultAddr, "serve /metrics, /healthz and /readyz here (empty: off); default $LISTEN_ADDRESS or :2112")
	drain := fs.Duration("drain-timeout", notifier.DefaultDrainTimeout, "on SIGINT/SIGTERM, deliver queued notifications for at most this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "notifier: unexpected argument %q (subcommands: config sample, config check)\n", fs.Arg(0))
		return 2
	}
	if *drain <= 0 {
		// The library would take it as "the default", not as "no drain".
		fmt.Fprintf(stderr, "notifier: --drain-timeout %v: want a positive duration\n", *drain)
		return 2
	}
	log, err := newLogger(stderr, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "notifier:", err)
		return 2
	}
	manager.RouteKlog(log)

	cfg, err := loadConfig(*configPath, lookupEnv, getenv)
	if err != nil {
		log.Error("Loading the config", "err", err)
		return 1
	}
	restCfg, err := restConfig(*master, *kubeconfig)
	if err != nil {
		log.Error("Building the client configuration", "err", err)
		return 1
	}
	err = notifier.Run(ctx, restCfg, *cfg, notifier.Options{
		Logger:       log,
		HTTPAddr:     *httpAddr,
		Out:          stdout,
		DrainTimeout: *drain,
	})
	if err != nil {
		log.Error("notifier stopped", "err", err)
		return 1
	}
	return 0
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

func restConfig(master, kubeconfig string) (*rest.Config, error) {
	if master == "" && kubeconfig == "" {
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	return clientcmd.BuildConfigFromFlags(master, kubeconfig)
}

// newLogger honours kubewatch's LOG_LEVEL and LOG_FORMATTER.
func newLogger(w io.Writer, getenv func(string) string) (*slog.Logger, error) {
	var level slog.Level
	switch l := strings.ToLower(getenv("LOG_LEVEL")); l {
	case "", "info":
		level = slog.LevelInfo
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error", "fatal", "panic":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("LOG_LEVEL=%q: want trace, debug, info, warning or error", l)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f := getenv("LOG_FORMATTER"); f {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("LOG_FORMATTER=%q: want json or text", f)
	}
}

func configCmd(args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool), getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: notifier config sample | notifier config check [--config PATH] | notifier config rbac [--config PATH] [--name NAME]")
		return 2
	}
	switch args[0] {
	case "sample":
		fmt.Fprint(stdout, notifier.SampleConfig)
		return 0
	case "check":
		fs := flag.NewFlagSet("notifier config check", flag.ContinueOnError)
		fs.SetOutput(stderr)
		configPath := fs.String("config", "", "config file (default $KW_CONFIG/.kubewatch.yaml, else $HOME/.kubewatch.yaml)")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		cfg, err := loadConfig(*configPath, lookupEnv, getenv)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
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
		return 0
	case "rbac":
		fs := flag.NewFlagSet("notifier config rbac", flag.ContinueOnError)
		fs.SetOutput(stderr)
		configPath := fs.String("config", "", "config file (default $KW_CONFIG/.kubewatch.yaml, else $HOME/.kubewatch.yaml)")
		name := fs.String("name", "notifier", "name of the ClusterRole")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		cfg, err := loadConfig(*configPath, lookupEnv, getenv)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		out, err := yaml.Marshal(notifier.ClusterRole(*name, cfg))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "# The read-only ClusterRole of the notifier's config: `notifier config rbac` wrote it.\n---\n%s", bytes.ReplaceAll(out, []byte("  creationTimestamp: null\n"), nil))
		return 0
	}
	fmt.Fprintf(stderr, "notifier config: unknown subcommand %q (sample, check, rbac)\n", args[0])
	return 2
}
