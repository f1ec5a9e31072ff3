package sharding_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/sharding"
)

// The shard selector of a replica holding slots 0 and 1 of 4, and where a
// namespace falls.
func ExampleSelector() {
	fmt.Println(sharding.Selector(sharding.ByNamespace, sharding.NewSet(4, 0, 1)))
	fmt.Println(sharding.SlotOf(sharding.Hash("default"), 4))
	// Output:
	// shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')
	// 3
}

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
		sharding.Gate(m, c, func(k cache.Key) (string, bool) { return k.Namespace, true }, func() []cache.Key {
			var keys []cache.Key
			for _, o := range cms.Lister().List(nil) {
				keys = append(keys, cache.KeyOf(o))
			}
			return keys
		})
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
