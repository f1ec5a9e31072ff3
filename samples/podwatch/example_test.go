package podwatch_test

import (
	"context"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/podwatch"
)

// Watch the pods of the "default" namespace of the cluster in $KUBECONFIG
// until the context ends (not run: it needs a cluster).
func ExampleRun() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := podwatch.Run(ctx, cfg, kloop.Options{Namespace: "default"}, podwatch.Options{}); err != nil {
		panic(err)
	}
}
