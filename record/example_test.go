package record_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/record"
)

func Example() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cfg)
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}

	r, err := record.New(cfg, record.Options{Component: "example-controller", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }() // writes until ctx ends, then drains

	// From a reconciler: cheap, never blocks on the API server.
	r.Event(cm, record.Normal, "Synced", fmt.Sprintf("synced from %s", "settings.yaml"))
	r.Event(cm, record.Warning, "InvalidKey", "key x is not a DNS label")
	r.Event(cm, record.Warning, "InvalidKey", "key x is not a DNS label") // a repeat: a series of 2

	cancel()
	if err := <-done; err != nil { // Start has written what was queued
		panic(err)
	}
	events, err := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	var lines []string
	for _, e := range events.Items {
		if e.Regarding.UID != cm.UID {
			continue
		}
		n := int32(1) // a singleton; a repeated event is a series that counts them
		if e.Series != nil {
			n = e.Series.Count
		}
		lines = append(lines, fmt.Sprintf("%s %s (x%d) from %s: %s", e.Type, e.Reason, n, e.ReportingController, e.Note))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// Normal Synced (x1) from example-controller: synced from settings.yaml
	// Warning InvalidKey (x2) from example-controller: key x is not a DNS label
}
