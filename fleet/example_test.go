package fleet_test

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/fleet"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// One Foo controller over the home cluster and every cluster of a
// kubeconfig directory: each key's Foo is read, and its Deployment made,
// in the key's cluster, through plain kloop handles of that cluster.
func ExampleNew() {
	var cfg *rest.Config // the home cluster's, from cli or clientcmd
	ctx := context.Background()
	app, err := kloop.New(cfg, kloop.Options{Scheme: foo.Scheme()})
	if err != nil {
		panic(err)
	}
	f, err := fleet.New(app, fleet.Options{Home: "home", KubeconfigDir: "/etc/fleet"})
	if err != nil {
		panic(err)
	}
	foos := fleet.Objects[*v1alpha1.Foo](f, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	deps := fleet.Objects[*appsv1.Deployment](f)
	_, err = fleet.NewController(f, "foo", func(ctx context.Context, k fleet.Key) (controller.Result, error) {
		c := f.Cluster(k.Cluster) // the cluster's App: its Client, Recorder, Logger
		r := foo.Reconciler{Foos: foos.In(k.Cluster), Deployments: deps.In(k.Cluster), Recorder: c.Recorder(), Logger: c.Logger()}
		return r.Reconcile(ctx, k.Key)
	}).For(foos).Owns(deps).Workers(4).Complete()
	if err != nil {
		panic(err)
	}
	_ = app.Run(ctx) // runs the clusters with the rest, until ctx is done
}
