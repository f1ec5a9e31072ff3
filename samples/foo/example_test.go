package foo_test

import (
	"context"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/foo"
)

// Install the Foo CRD in the cluster of $KUBECONFIG and run the controller
// for every namespace until the context ends (not run: it needs a cluster).
func ExampleRun() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := kloop.InstallCRD(ctx, cfg, foo.CRDYAML); err != nil {
		panic(err)
	}
	if err := foo.Run(ctx, cfg, kloop.Options{}); err != nil {
		panic(err)
	}
}
