package podsim_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/samples/podsim"
)

// Simulate a node for the pods of one namespace: a pod created there is
// bound to the node and becomes Running and Ready, with no kubelet.
func ExampleRun() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "example"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		panic(err)
	}
	// Pods need their namespace's default ServiceAccount.
	if _, err := cs.CoreV1().ServiceAccounts("example").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		panic(err)
	}

	done := make(chan error, 1)
	go func() {
		done <- podsim.Run(ctx, cfg, podsim.Options{
			NodeName: "example-node", Namespace: "example",
			Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		})
	}()

	pods := cs.CoreV1().Pods("example")
	wctx, wcancel := context.WithTimeout(ctx, time.Minute) // ends the watch if the pod never runs
	defer wcancel()
	w, err := pods.Watch(wctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "web").String()})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified && podsim.Running(p) {
			fmt.Println(p.Name, "on", p.Spec.NodeName, "is", p.Status.Phase)
			break
		}
	}
	w.Stop()
	stop()
	fmt.Println("Run returned", <-done)
	// Output:
	// web on example-node is Running
	// Run returned <nil>
}
