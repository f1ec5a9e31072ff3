// Command kloop is kloop's developer tool.
//
//	kloop dev [--data-dir DIR] [--no-controller-manager] [--controllers job-controller,...] [--podsim]
//	          [--feature-gates Name=true,...] [--bin-dir DIR] [--log-level info]
//	          [--apply FILE|DIR]... [-- COMMAND [ARG...]]
//
// starts a local control plane (etcd, kube-apiserver and
// kube-controller-manager on 127.0.0.1) in the foreground, writes an admin
// kubeconfig and prints `export KUBECONFIG=<path>`. --controllers adds
// kube-controller-manager controllers to testenv's DefaultControllers;
// --podsim also runs podsim (a simulated kubelet, as kloop demo does);
// --feature-gates sets kube-apiserver feature gates on top of testenv's
// DefaultFeatureGates; --apply installs the CRDs of the YAML files given
// and server-side applies their other objects once the control plane is
// ready; a COMMAND after -- then runs with KUBECONFIG set (a project's
// make demo runs its controller so), and its exit ends kloop dev with its
// status. Ctrl-C stops everything
// and exits 0; a second Ctrl-C kills the control plane, removes its
// temporary directory and exits 1 at once.
//
//	kloop demo [--data-dir DIR] [--bin-dir DIR] [--namespace default] [--log-level warn] [--debug-bind-address 127.0.0.1:0]
//
// does the same, then installs the Foo CRD, runs podsim (a simulated
// kubelet) and the Foo controller in the same process, prints the URL of
// the controller's live debug page (package debug), applies
// sample-controller's example-foo.yaml and prints one line per change of the
// namespace's Foos, Deployments, pods and events until Ctrl-C (exit 0).
//
//	kloop controlplane install [--from DIR] [--bin-dir DIR] [--kloop-dir DIR]
//	kloop controlplane dir
//
// builds etcd, kube-apiserver and kube-controller-manager from
// tools/controlplane of the kloop checkout the command was built from into
// the per-user directory where testenv, kloop dev and projects made by
// kloop init find them (internal/cpbin.UserDir), or copies them there from
// --from; dir prints where they are looked up.
//
//	kloop init [DIR] --module PATH --group GROUP --kind KIND [--version v1alpha1] [--kloop-dir DIR]
//
// creates a controller project of one's own in an empty directory: an API
// type with kubebuilder markers, its controller on kloop's builder, a
// command on package cli, unit and end-to-end tests, deploy/ and a
// Makefile with make demo and make test (docs/project.md). Its go.mod
// replaces kloop with the checkout this command was built from.
//
//	kloop version
//
// dev and demo take kloop's logging flags (package cli): --log-level, --log-format
// and klog's -v. The control plane's own lines (its processes and their
// pids) are logged at info whatever the level.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
)

// main runs without cli.Main's signal context: dev and demo handle
// SIGINT and SIGTERM themselves (see interrupts).
func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run(context.Background(), rootCommand(), args, stdout, stderr)
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kloop",
		Short: "kloop's developer tool: a local control plane, the Foo demo on it, and new controller projects",
	}
	root.AddCommand(devCommand(), demoCommand(), controlPlaneCommand(), initCommand())
	return root
}

// controlPlaneFlags are the flags dev and demo share.
type controlPlaneFlags struct {
	dataDir, binDir string
	logging         cli.Logging
}

func (f *controlPlaneFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", "", "keep etcd data, certificates and the kubeconfig in this `dir` across runs (default: a temporary directory removed on exit)")
	fs.StringVar(&f.binDir, "bin-dir", "", "`dir` holding etcd, kube-apiserver and kube-controller-manager (default: $"+testenv.BinDirEnv+", else the per-user directory that \"kloop controlplane install\" fills; see \"kloop controlplane dir\")")
	f.logging.AddFlags(fs)
}

// loggers returns the command's logger and the control plane's, which
// writes in the same format at info at least.
func (f *controlPlaneFlags) loggers(cmd *cobra.Command) (log, controlPlane *slog.Logger, err error) {
	if log, err = f.logging.Setup(cmd); err != nil {
		return nil, nil, err
	}
	cp := cli.Logging{Level: "info", Format: f.logging.Format}
	if log.Enabled(context.Background(), slog.LevelInfo-1) { // debug, or -v
		return log, log, nil
	}
	controlPlane, err = cp.NewLogger(cmd.ErrOrStderr())
	return log, controlPlane, err
}

// devFlags are kloop dev's own flags.
type devFlags struct {
	noKCM        bool
	controllers  []string
	podsim       bool
	featureGates string
	apply        []string
}

// devRun is what kloop dev runs besides the control plane.
type devRun struct {
	podsim    bool
	manifests []document // to apply once the control plane is ready
	command   []string   // to run with KUBECONFIG set, after the manifests
}

func devCommand() *cobra.Command {
	f := &controlPlaneFlags{logging: cli.Logging{Level: "info", Format: "text"}}
	d := &devFlags{}
	cmd := &cobra.Command{
		Use:   "dev [flags] [-- COMMAND [ARG...]]",
		Short: "Run a local control plane in the foreground (Ctrl-C stops it), optionally with manifests applied and a command on it",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); len(args) > 0 && dash != 0 {
				return cli.Usagef("kloop dev takes no argument %q: put the command to run after --, as in kloop dev --apply config/crd -- bin/my-controller", args[0])
			}
			opts, err := d.options(f)
			if err != nil {
				return err
			}
			manifests, err := readManifests(d.apply)
			if err != nil {
				return err
			}
			log, cpLog, err := f.loggers(cmd)
			if err != nil {
				return err
			}
			opts.Logger = cpLog
			run := devRun{podsim: d.podsim, manifests: manifests, command: args}
			if code := dev(opts, run, log, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				return cli.ExitCode(code)
			}
			return nil
		},
	}
	f.add(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&d.noKCM, "no-controller-manager", false, "do not start kube-controller-manager")
	fs.StringSliceVar(&d.controllers, "controllers", nil, "more kube-controller-manager `names`, comma-separated (job-controller, cronjob-controller, ...), started in addition to the default deployment, replicaset, garbage-collector, namespace and serviceaccount controllers; -name turns a default one off, * turns on all of Kubernetes' defaults")
	fs.BoolVar(&d.podsim, "podsim", false, "also run podsim, the simulated kubelet of kloop demo: one Ready node that binds and runs pods and finishes the pods of Jobs")
	fs.StringArrayVar(&d.apply, "apply", nil, "once the control plane is ready, install the CustomResourceDefinitions and then server-side apply the other objects in `path`: a YAML file, or a directory of .yaml and .yml files; repeatable")
	fs.StringVar(&d.featureGates, "feature-gates", "", "kube-apiserver feature `gates`, Name=true or Name=false, comma-separated, on top of kloop's defaults (ShardedListAndWatch=true)")
	return cmd
}

// controllerName is what kube-controller-manager's --controllers takes: a
// controller's name, the name after "-" (off), or "*".
var controllerName = regexp.MustCompile(`^(\*|-?[a-z0-9]([a-z0-9-]*[a-z0-9])?)$`)

// options checks the flags and returns the control plane's options (all
// but the logger).
func (d *devFlags) options(f *controlPlaneFlags) (testenv.Options, error) {
	opts := testenv.Options{DataDir: f.dataDir, BinDir: f.binDir, ControllerManager: !d.noKCM}
	for _, c := range d.controllers {
		if !controllerName.MatchString(c) {
			return opts, &cli.FlagError{Flag: "--controllers", Value: c, Want: "not a kube-controller-manager controller name; give names such as job-controller, -deployment-controller (off) or *, comma-separated"}
		}
	}
	if len(d.controllers) > 0 && d.noKCM {
		return opts, cli.Usagef("--controllers names kube-controller-manager's controllers, and --no-controller-manager starts none: give one of them")
	}
	opts.Controllers = d.controllers
	gates, err := parseFeatureGates(d.featureGates)
	if err != nil {
		return opts, err
	}
	opts.FeatureGates = gates
	return opts, nil
}

// featureGateName is a Kubernetes feature gate's name (CamelCase).
var featureGateName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// parseFeatureGates parses --feature-gates' "A=true,B=false"; empty
// entries are skipped.
func parseFeatureGates(s string) (map[string]bool, error) {
	var gates map[string]bool
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, value, ok := strings.Cut(entry, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		on, err := strconv.ParseBool(value)
		if !ok || err != nil || !featureGateName.MatchString(name) {
			return nil, &cli.FlagError{Flag: "--feature-gates", Value: s, Want: fmt.Sprintf("the entry %q is not Name=true or Name=false (for example ShardedListAndWatch=false)", entry)}
		}
		if _, dup := gates[name]; dup {
			return nil, &cli.FlagError{Flag: "--feature-gates", Value: s, Want: fmt.Sprintf("the gate %s is set twice; give it once", name)}
		}
		if gates == nil {
			gates = map[string]bool{}
		}
		gates[name] = on
	}
	return gates, nil
}

// dev runs the control plane of opts, and podsim, the manifests and the
// command when asked, logging to log, until a signal (or the command's
// exit) and returns the exit code: the command's when it exited by itself.
func dev(opts testenv.Options, run devRun, log *slog.Logger, stdout, stderr io.Writer) int {

	// The first signal stops the control plane; a second one kills it and
	// ends the process at once (see interrupts).
	ctx, in := notifyInterrupts(stderr)
	defer in.stop()
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	env, code := startControlPlane(ctx, in, "kloop dev", opts, stderr)
	if env == nil {
		return code
	}
	fmt.Fprintf(stdout, "# control plane ready at %s; point kubectl at it with:\nexport KUBECONFIG=%s\n", env.APIServerURL, env.KubeconfigPath)
	podsimDone := make(chan error, 1)
	if run.podsim {
		fmt.Fprintf(stdout, "# podsim runs node %s: it binds and runs pods, and finishes the pods of Jobs\n", podsim.DefaultNodeName)
		go func() {
			err := podsim.Run(ctx, env.Config, podsim.Options{Logger: log.With("component", "podsim"), Registry: prometheus.NewRegistry()})
			if err != nil {
				// Without it pods never run: stop rather than look fine.
				stop()
			}
			podsimDone <- err
		}()
	} else {
		podsimDone <- nil
	}
	if err := applyManifests(ctx, env.Config, run.manifests, stdout); err != nil {
		code = exitCode(ctx, "kloop dev", err, stderr)
		stop()
	}
	var child *childProcess
	if len(run.command) > 0 && ctx.Err() == nil {
		var err error
		if child, err = startChild(run.command, env.KubeconfigPath, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "kloop dev: %v\n", err)
			code = 1
			stop()
		} else {
			fmt.Fprintf(stdout, "# running %s with KUBECONFIG=%s; Ctrl-C stops it, then the control plane\n", strings.Join(run.command, " "), env.KubeconfigPath)
		}
	}
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	if child != nil {
		select {
		case <-ctx.Done():
			child.interrupt()
			<-child.done
		case code = <-child.done:
			fmt.Fprintf(stderr, "kloop dev: %s exited with status %d\n", run.command[0], code)
			stop()
		}
	}
	<-ctx.Done()
	opts.Logger.Info("stopping control plane")
	holdStop()
	if err := <-podsimDone; err != nil {
		fmt.Fprintf(stderr, "kloop dev: podsim: %v\n", err)
		code = 1
	}
	env.Stop()
	in.forget()
	return code
}

// holdStop runs between the signal and the stop of the control plane. The
// tests of this package hold the stop there, so that their second signal
// finds it under way whatever the machine's speed.
var holdStop = func() {}

// startControlPlane starts the local control plane for the command name
// ("kloop dev") and hands it to in, so that a second signal kills it. When
// it does not start it returns nil and the exit code (see exitCode).
func startControlPlane(ctx context.Context, in *interrupts, name string, opts testenv.Options, stderr io.Writer) (*testenv.Env, int) {
	env, err := testenv.Start(ctx, opts)
	if err != nil {
		return nil, exitCode(ctx, name, err, stderr)
	}
	in.controlPlane(env, opts.DataDir == "")
	return env, 0
}

// exitCode is the exit code of the command name after a step failed with
// err: 0 when a signal ended ctx first (the step only stopped), else 1,
// after printing err.
func exitCode(ctx context.Context, name string, err error, stderr io.Writer) int {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
