package podsim_test

import (
	"context"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop/samples/podsim"
)

// Simulate the node "kloop-node" for the pods of every namespace of the
// cluster in $KUBECONFIG until the context ends (not run: it needs a
// cluster).
func ExampleRun() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := podsim.Run(ctx, cfg, podsim.Options{}); err != nil {
		panic(err)
	}
}
