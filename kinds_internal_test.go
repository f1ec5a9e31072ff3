package kloop

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/kindgate"
)

// A controller held for a kind reconciles nothing while the kind is not
// served, and again once it is; a sharding Restrict keeps the hold.
func TestHoldKinds_NoReconcileWhileAKindIsNotServedAndShardingKeepsTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 10)
		c, err := controller.New[cache.Key](controller.ReconcilerFunc[cache.Key](func(_ context.Context, k cache.Key) (controller.Result, error) {
			got <- k.Name
			return controller.Result{}, nil
		}), controller.Options[cache.Key]{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		a := &App{opts: Options{WaitForKinds: true}, log: slog.New(slog.DiscardHandler)}
		foo := schema.GroupVersionKind{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}
		g := a.kindGate(foo, foo.GroupVersion().WithResource("foos"), true, false)
		if g == nil || a.kindGate(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, schema.GroupVersionResource{}, true, false) != nil {
			t.Fatal("a custom kind has no gate, or a built-in kind has one")
		}
		if err := a.holdKinds(c, []*kindgate.Gate{g}); err != nil {
			t.Fatal(err)
		}
		h := &handover[cache.Key]{c: c, held: a.heldBy(c)}
		if err := c.Watch(h); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		synctest.Wait()

		c.Enqueue(cache.Key{Namespace: "ns", Name: "held"})
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("reconciled %q while Foo is not served", <-got)
		}
		if !containsLine(a.kindsReport(), "waiting for kind Foo samplecontroller.k8s.io/v1alpha1: not served") {
			t.Errorf("readiness report %q does not name the waiting kind", a.kindsReport())
		}

		g.Reopen()
		c.Enqueue(cache.Key{Namespace: "ns", Name: "served"})
		synctest.Wait()
		if k := <-got; k != "served" {
			t.Errorf("reconciled %q, want served", k)
		}
		if r := a.kindsReport(); r != "kinds: every kind served\n" {
			t.Errorf("readiness report %q once Foo is served", r)
		}

		// Sharding restricts to its share: the hold stays.
		if err := h.Restrict(ctx, func(k cache.Key) bool { return k.Name != "other-shard" }); err != nil {
			t.Fatal(err)
		}
		g.Shut("not served")
		c.Enqueue(cache.Key{Namespace: "ns", Name: "held-again"})
		synctest.Wait()
		g.Reopen()
		c.Enqueue(cache.Key{Namespace: "ns", Name: "other-shard"})
		c.Enqueue(cache.Key{Namespace: "ns", Name: "mine"})
		synctest.Wait()
		if k := <-got; k != "mine" || len(got) != 0 {
			t.Errorf("reconciled %q (and %d more), want only mine: held-again was enqueued while Foo was gone, other-shard is another replica's", k, len(got))
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

func containsLine(s, line string) bool {
	for l := range strings.Lines(s) {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
