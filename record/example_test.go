package record_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/record"
)

func Example() {
	var (
		cfg *rest.Config    // from a kubeconfig or in-cluster
		pod *corev1.Pod     // the object the event is about
		ctx context.Context // the program's context
	)
	r, err := record.New(cfg, record.Options{Component: "example-controller"})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }() // writes until ctx ends, then drains

	// From a reconciler: cheap, never blocks on the API server.
	r.Eventf(pod, record.Normal, "Scheduled", "assigned to node %s", "node-1")
	r.Event(pod, record.Warning, "BackOff", "restarting failed container")

	<-done
}
