package kloop

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

func TestHandover_KeysOfATakenOverSlotSaySoInTheirCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 2)
		c, err := controller.New[cache.Key](controller.ReconcilerFunc[cache.Key](func(ctx context.Context, _ cache.Key) (controller.Result, error) {
			causes, _ := controller.CausesFrom(ctx)
			for _, x := range causes {
				got <- x.Source
			}
			return controller.Result{}, nil
		}), controller.Options[cache.Key]{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		h := &handover[cache.Key]{c: c}
		if err := c.Watch(h); err != nil {
			t.Fatal(err)
		}
		h.Enqueue(cache.Key{Namespace: "ns", Name: "before"}) // before Start: an Enqueue
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		synctest.Wait()
		h.Enqueue(cache.Key{Namespace: "ns", Name: "after"})
		synctest.Wait()
		if a, b := <-got, <-got; a != "Enqueue" || b != "Handover" {
			t.Errorf("causes %q, %q; want Enqueue (before Start), then Handover", a, b)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}
