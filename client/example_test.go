package client_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/informer"
)

// A reconciler that makes sure a ConfigMap exists. Reading through the
// CachedReader, a second reconcile right after the create sees the created
// object even if the informer has not delivered it yet, so it does not try
// to create it again.
func Example() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	ctx, cancel := context.WithCancel(context.Background())
	factory := informer.NewFactory(cfg, informer.FactoryOptions{})
	store, err := informer.Of[*corev1.ConfigMap](factory, informer.Scope{Namespace: "default"})
	if err != nil {
		panic(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- factory.Start(ctx) }()
	defer func() { cancel(); <-stopped }()
	if err := factory.WaitForSync(ctx); err != nil {
		panic(err)
	}

	c, err := client.New(cfg, client.Options{FieldManager: "example-controller"})
	if err != nil {
		panic(err)
	}
	cms, err := client.NewResource[*corev1.ConfigMap](c, corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		panic(err)
	}
	cached := cms.Cached(store.Lister(), client.ReaderOptions{})

	reconcile := func(ctx context.Context, namespace, name string) error {
		_, err := cached.Get(ctx, namespace, name)
		switch {
		case errors.Is(err, client.ErrCacheStale):
			return err // the cache is behind our own write: retry later
		case apierrors.IsNotFound(err):
			fmt.Println("creating", name)
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
			return err
		default:
			fmt.Println(name, "exists")
			return err
		}
	}
	for range 2 {
		if err := reconcile(ctx, "default", "example-settings"); err != nil {
			panic(err)
		}
	}
	_ = cms.Delete(ctx, "default", "example-settings", metav1.DeleteOptions{})
	// Output:
	// creating example-settings
	// example-settings exists
}
