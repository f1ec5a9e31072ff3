// Command kloop is kloop's developer tool.
//
//	kloop dev [--data-dir DIR] [--no-controller-manager] [--bin-dir DIR] [--log-level info]
//
// starts a local control plane (etcd, kube-apiserver and
// kube-controller-manager on 127.0.0.1) in the foreground, writes an admin
// kubeconfig and prints `export KUBECONFIG=<path>`. Ctrl-C stops everything
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
//	kloop version
//
// Both take kloop's logging flags (package cli): --log-level, --log-format
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

	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop/cli"
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
		Short: "kloop's developer tool: a local control plane, and the Foo demo on it",
	}
	root.AddCommand(devCommand(), demoCommand())
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
	fs.StringVar(&f.binDir, "bin-dir", "", "`dir` holding etcd, kube-apiserver and kube-controller-manager (default: bin/ at the repository root, built by \"make controlplane\")")
	f.logging.AddFlags(fs)
}

// loggers returns the command's logger and the control plane's, which
// writes in the same format at info at least.
func (f *controlPlaneFlags) loggers(cmd *cobra.Command) (log, controlPlane *slog.Logger, err error) {
	if log, err = f.logging.Setup(cmd); err != nil {
		return nil, nil, err
	}
	cp := cli.Logging{Level: "info", Format: f.logging.Format}
	if lvl, _ := f.logging.SlogLevel(); lvl < slog.LevelInfo {
		return log, log, nil
	}
	controlPlane, err = cp.NewLogger(cmd.ErrOrStderr())
	return log, controlPlane, err
}

func devCommand() *cobra.Command {
	f := &controlPlaneFlags{logging: cli.NewLogging()}
	var noKCM bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local control plane in the foreground (Ctrl-C stops it)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, log, err := f.loggers(cmd)
			if err != nil {
				return err
			}
			if code := dev(f.dataDir, f.binDir, !noKCM, log, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				return cli.ExitCode(code)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&noKCM, "no-controller-manager", false, "do not start kube-controller-manager")
	return cmd
}

// dev runs the control plane, logging to log, until a signal and returns
// the exit code.
func dev(dataDir, binDir string, kcm bool, log *slog.Logger, stdout, stderr io.Writer) int {

	// The first signal stops the control plane; a second one kills it and
	// ends the process at once (see interrupts).
	ctx, in := notifyInterrupts(stderr)
	defer in.stop()

	env, code := startControlPlane(ctx, in, "kloop dev", testenv.Options{
		DataDir:           dataDir,
		ControllerManager: kcm,
		BinDir:            binDir,
		Logger:            log,
	}, stderr)
	if env == nil {
		return code
	}
	fmt.Fprintf(stdout, "# control plane ready at %s; point kubectl at it with:\nexport KUBECONFIG=%s\n", env.APIServerURL, env.KubeconfigPath)
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	<-ctx.Done()
	log.Info("stopping control plane")
	holdStop()
	env.Stop()
	in.forget()
	return 0
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
