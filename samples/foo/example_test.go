package foo_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// Install the Foo CRD and run the controller for one namespace: a Foo
// created there gets the Deployment it names, owned by the Foo.
func ExampleRun() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := manifest.InstallCRD(ctx, cfg, foo.CRDYAML); err != nil {
		panic(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "example"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		panic(err)
	}

	done := make(chan error, 1)
	go func() {
		done <- foo.Run(ctx, cfg, kloop.Options{Namespace: "example", Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	}()

	wctx, wcancel := context.WithTimeout(ctx, time.Minute) // ends the watch if no Deployment comes
	defer wcancel()
	w, err := cs.AppsV1().Deployments("example").Watch(wctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "example-web").String()})
	if err != nil {
		panic(err)
	}
	defer w.Stop()
	c, err := client.New(cfg, client.Options{Scheme: foo.Scheme()})
	if err != nil {
		panic(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		panic(err)
	}
	if _, err := foos.Create(ctx, &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Namespace: "example", Name: "web"},
		Spec:       v1alpha1.FooSpec{DeploymentName: "example-web", Replicas: ptr.To[int32](2)},
	}); err != nil {
		panic(err)
	}
	for ev := range w.ResultChan() {
		if d, ok := ev.Object.(*appsv1.Deployment); ok {
			owner := metav1.GetControllerOf(d)
			fmt.Printf("Deployment %s: %d replicas, controlled by %s %s\n", d.Name, *d.Spec.Replicas, owner.Kind, owner.Name)
			break
		}
	}
	stop()
	fmt.Println("Run returned", <-done)
	// Output:
	// Deployment example-web: 2 replicas, controlled by Foo web
	// Run returned <nil>
}
