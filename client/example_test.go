package client_test

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
)

// A reconciler that makes sure a ConfigMap exists. Reading through the
// CachedReader, a second reconcile right after the create sees the created
// object even if the informer has not delivered it yet, so it does not try
// to create it again.
func Example() {
	var (
		cfg   *rest.Config                    // from a kubeconfig or in-cluster
		store cache.Lister[*corev1.ConfigMap] // an informer's store of ConfigMaps
	)
	run := func(ctx context.Context) error {
		c, err := client.New(cfg, client.Options{FieldManager: "example-controller"})
		if err != nil {
			return err
		}
		cms, err := client.NewResource[*corev1.ConfigMap](c, corev1.SchemeGroupVersion.WithResource("configmaps"))
		if err != nil {
			return err
		}
		cached := cms.Cached(store, client.ReaderOptions{})

		reconcile := func(ctx context.Context, namespace, name string) error {
			_, err := cached.Get(ctx, namespace, name)
			switch {
			case errors.Is(err, client.ErrCacheStale):
				return err // the cache is behind our own write: retry later
			case apierrors.IsNotFound(err):
				_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
				return err
			default:
				return err
			}
		}
		return reconcile(ctx, "default", "settings")
	}
	_ = run
}
