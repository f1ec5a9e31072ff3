// Command foo-controller runs the Foo controller (samples/foo): for every
// samplecontroller.k8s.io/v1alpha1 Foo it keeps a Deployment of nginx pods
// named spec.deploymentName with spec.replicas replicas, and reports the
// available ones in status.availableReplicas. It is kloop's
// sample-controller, with the same flags:
//
//	foo-controller [--kubeconfig PATH] [--master URL] [--namespace NS] [--workers 2] [--http-addr ADDR]
//
// Without --kubeconfig and --master it uses the in-cluster configuration.
// The Foo CRD must be installed (samples/foo/crd, or sample-controller's
// crd.yaml or crd-status-subresource.yaml). Logs go to stderr. SIGINT or
// SIGTERM stops it after the syncs in flight (exit 0); a second signal exits
// 1 at once.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/samples/foo"
)

func main() {
	ctx, stop := manager.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("foo-controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Path to a kubeconfig. Only required if out-of-cluster.")
	master := fs.String("master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig. Only required if out-of-cluster.")
	namespace := fs.String("namespace", "", "watch the Foos and Deployments of this namespace only (default: all namespaces)")
	workers := fs.Int("workers", foo.DefaultWorkers, "Foos synced at once")
	httpAddr := fs.String("http-addr", "", "serve /metrics, /healthz and /readyz at this address (empty: off)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	manager.RouteKlog(log)

	cfg, err := clientcmd.BuildConfigFromFlags(*master, *kubeconfig)
	if err != nil {
		log.Error("Building the client configuration", "err", err)
		return 1
	}
	app, err := kloop.New(cfg, kloop.Options{
		Name:        foo.ControllerName,
		Scheme:      foo.Scheme(),
		Namespace:   *namespace,
		MetricsAddr: *httpAddr,
		HealthAddr:  *httpAddr,
		Logger:      log,
	})
	if err == nil {
		err = foo.Setup(app, *workers)
	}
	if err == nil {
		log.Info("Starting Foo controller", "namespace", *namespace)
		err = app.Run(ctx)
		log.Info("Stopped Foo controller")
	}
	if err != nil {
		log.Error("foo-controller stopped", "err", err)
		return 1
	}
	return 0
}
