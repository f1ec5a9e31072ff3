// Command kloop is kloop's developer tool.
//
//	kloop dev [--data-dir DIR] [--no-controller-manager] [--bin-dir DIR]
//
// starts a local control plane (etcd, kube-apiserver and
// kube-controller-manager on 127.0.0.1) in the foreground, writes an admin
// kubeconfig and prints `export KUBECONFIG=<path>`. Ctrl-C stops everything
// and exits 0; a second Ctrl-C kills the control plane, removes its
// temporary directory and exits 1 at once.
//
//	kloop demo [--data-dir DIR] [--bin-dir DIR] [--namespace default] [-v] [--debug-bind-address 127.0.0.1:0]
//
// does the same, then installs the Foo CRD, runs podsim (a simulated
// kubelet) and the Foo controller in the same process, prints the URL of
// the controller's live debug page (package debug), applies
// sample-controller's example-foo.yaml and prints one line per change of the
// namespace's Foos, Deployments, pods and events until Ctrl-C (exit 0).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/kloop-dev/kloop/testenv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: kloop <command> [flags]

commands:
  demo   run the local control plane with podsim and the Foo controller, apply example-foo.yaml and print what happens
  dev    run a local control plane in the foreground (Ctrl-C stops it)
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "dev":
		return dev(args[1:], stdout, stderr)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kloop: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func dev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kloop dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "keep etcd data, certificates and the kubeconfig here across runs (default: a temporary directory removed on exit)")
	noKCM := fs.Bool("no-controller-manager", false, "do not start kube-controller-manager")
	binDir := fs.String("bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager (default: bin/ at the repository root; build with `make controlplane`)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kloop dev: unexpected arguments %v\n", fs.Args())
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	// The first signal stops the control plane; a second one kills it and
	// ends the process at once (see interrupts).
	ctx, in := notifyInterrupts(stderr)
	defer in.stop()

	env, err := testenv.Start(ctx, testenv.Options{
		DataDir:           *dataDir,
		ControllerManager: !*noKCM,
		BinDir:            *binDir,
		Logger:            log,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 0
		}
		fmt.Fprintf(stderr, "kloop dev: %v\n", err)
		return 1
	}
	in.controlPlane(env, *dataDir == "")
	fmt.Fprintf(stdout, "# control plane ready at %s; point kubectl at it with:\nexport KUBECONFIG=%s\n", env.APIServerURL, env.KubeconfigPath)
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	<-ctx.Done()
	log.Info("stopping control plane")
	env.Stop()
	in.forget()
	return 0
}
