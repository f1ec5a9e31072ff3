package sharding_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/sharding"
)

// A replica of a ConfigMap controller sharded by namespace, wired by hand
// (kloop.Options.Sharding does this on the builder): the member is the
// factory's Restrict, and Gate keeps the controller to the member's slots.
func ExampleMember() {
	run := func(ctx context.Context, cfg *rest.Config) error {
		m, err := sharding.New(cfg, sharding.Options{Group: "cm-controller", Namespace: "kube-system"})
		if err != nil {
			return err
		}
		f := informer.NewFactory(cfg, informer.FactoryOptions{Restrict: m.Shard})
		cms, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{})
		if err != nil {
			return err
		}
		c, err := controller.New[cache.Key](controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
			return controller.Result{}, nil // reconcile k
		}), controller.Options[cache.Key]{Name: "cm-controller"})
		if err != nil {
			return err
		}
		if err := c.Watch(controller.For[*corev1.ConfigMap](cms)); err != nil {
			return err
		}
		if err := sharding.Gate(m, c, nil, func() []cache.Key {
			var keys []cache.Key
			for _, o := range cms.Lister().List(nil) {
				keys = append(keys, cache.KeyOf(o))
			}
			return keys
		}); err != nil {
			return err
		}
		// Run all three until ctx is done (a manager does this).
		errs := make(chan error, 3)
		for _, start := range []func(context.Context) error{f.Start, c.Start, m.Start} {
			go func() { errs <- start(ctx) }()
		}
		for range 3 {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	}
	_ = run
}
