// Command podwatch prints the pods of one namespace as they are added,
// changed and deleted: client-go's workqueue example, built on kloop.
//
//	podwatch [--namespace default] [--kubeconfig PATH] [--master URL] [--workers 1] [--http-addr ADDR]
//
// Without --kubeconfig and --master it uses the in-cluster configuration.
// Lines go to stdout, logs to stderr. SIGINT or SIGTERM stops it after the
// sync in flight (exit 0); a second signal exits 1 at once.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/samples/podwatch"
)

func main() {
	ctx, stop := manager.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("podwatch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	namespace := fs.String("namespace", podwatch.DefaultNamespace, "namespace whose pods are watched")
	kubeconfig := fs.String("kubeconfig", "", "absolute path to the kubeconfig file; empty means in-cluster configuration")
	master := fs.String("master", "", "address of the API server; overrides the kubeconfig's")
	workers := fs.Int("workers", 1, "pods synced at once")
	httpAddr := fs.String("http-addr", "", "serve /metrics, /healthz and /readyz at this address (empty: off)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	manager.RouteKlog(log)

	cfg, err := clientcmd.BuildConfigFromFlags(*master, *kubeconfig)
	if err != nil {
		log.Error("Building the client configuration", "err", err)
		return 1
	}
	err = podwatch.Run(ctx, cfg, podwatch.Options{
		Namespace: *namespace,
		Workers:   *workers,
		Out:       stdout,
		Logger:    log,
		HTTPAddr:  *httpAddr,
	})
	if err != nil {
		log.Error("podwatch stopped", "err", err)
		return 1
	}
	return 0
}
