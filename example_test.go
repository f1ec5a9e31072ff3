package kloop_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// A whole controller: an App, a handle per kind, one statement for the
// controller, and Run. This one keeps a note of each Foo's Deployment; the
// declarations make no request (both resources are named), so the example
// runs without a cluster and stops before Run. samples/confighash is a
// complete program of this shape that its test runs on a real API server.
func Example() {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"} // from cli.Flags.Config in a command
	app, err := kloop.New(cfg, kloop.Options{
		Name:     "foo-notes",
		Scheme:   foo.Scheme(),
		Logger:   slog.New(slog.DiscardHandler),
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		panic(err)
	}
	foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	deployments := kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")})

	reconcile := func(ctx context.Context, key cache.Key) (controller.Result, error) {
		f, err := foos.Get(ctx, key.Namespace, key.Name) // the cache, with this App's own writes
		if apierrors.IsNotFound(err) {
			return controller.Result{}, nil
		}
		if err != nil {
			return controller.Result{}, err
		}
		if _, err := deployments.Get(ctx, f.Namespace, f.Spec.DeploymentName); apierrors.IsNotFound(err) {
			app.Recorder().Event(f, "Normal", "NoDeployment", "no Deployment "+f.Spec.DeploymentName+" yet")
		}
		return controller.Result{}, nil
	}
	c, err := kloop.NewController(app, "foo-notes", reconcile).For(foos).Owns(deployments).Workers(2).Complete()
	if err != nil {
		panic(err)
	}
	fmt.Println("controller", c.Name(), "for", foos.GVR().Resource, "owning", deployments.GVR().Resource)
	// A real program ends with: return app.Run(ctx)

	// Mistakes are kept and returned by Run, which then starts nothing.
	bad, _ := kloop.New(cfg, kloop.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	kloop.NewController(bad, "bad", reconcile).Owns(kloop.Objects[*appsv1.Deployment](bad, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")})).Complete()
	fmt.Println(bad.Run(context.Background()))
	// Output:
	// controller foo-notes for foos owning deployments
	// kloop: controller "bad": Owns(Deployment) before For: give For first, Owns maps objects to owners of the For kind
}

// A transform trims each object before the cache keeps it. Its type is the
// handle's, func(*appsv1.Deployment) *appsv1.Deployment here: one for
// another kind does not compile.
func ExampleHandle_WithTransform() {
	app, err := kloop.New(&rest.Config{Host: "https://127.0.0.1:6443"}, kloop.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	deployments := kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")}).
		WithTransform(foo.LeanDeployment)
	fmt.Println(deployments.GVR().Resource, deployments.Err())
	// Output: deployments <nil>
}

// A controller keyed by a type of the program's own, here a team name
// that a label of each ConfigMap gives: its sources are Watches that map
// objects to the key.
func ExampleNewKeyedController() {
	app, err := kloop.New(&rest.Config{Host: "https://127.0.0.1:6443"}, kloop.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("configmaps")})
	reconcile := func(ctx context.Context, team string) (controller.Result, error) {
		return controller.Result{}, nil // the team's shared state
	}
	team := func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["team"]} }
	c, err := kloop.NewKeyedController(app, "teams", reconcile).Watches(kloop.MapTo(cms, team)).Complete()
	if err != nil {
		panic(err)
	}
	fmt.Println("controller", c.Name(), "keyed by team")
	// Output: controller teams keyed by team
}
