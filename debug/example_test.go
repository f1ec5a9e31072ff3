package debug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/manager"
)

// Serve a manager's page on a free loopback port and read its snapshot as
// a script would.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	mgr, err := manager.New(manager.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	hello, err := controller.New(controller.ReconcilerFunc[string](func(context.Context, string) (controller.Result, error) {
		return controller.Result{}, nil
	}), controller.Options[string]{Name: "hello", Logger: quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		log.Fatal(err)
	}
	hello.Enqueue("world")
	if err := mgr.Add(hello); err != nil {
		log.Fatal(err)
	}
	srv, err := debug.New(mgr, debug.Options{Addr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	// The manager would start it with the rest (mgr.Add(srv)); here it runs
	// alone, and shows the controller before it starts.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	defer func() { stop(); <-done }()
	<-srv.AddrReady()

	resp, err := http.Get(srv.URL(debug.SnapshotPath))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	// The snapshot is a JSON document (its fields are in the package
	// documentation); decode the fields you need.
	var snap struct {
		Version     int
		Level       string
		Controllers []struct {
			Name       string
			Reconciles struct{ Total int }
			Queue      struct{ Ready int }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		log.Fatal(err)
	}
	c := snap.Controllers[0]
	fmt.Printf("schema %d, level %s: controller %s, %d reconciles, %d key ready\n", snap.Version, snap.Level, c.Name, c.Reconciles.Total, c.Queue.Ready)
	// Output: schema 1, level ok: controller hello, 0 reconciles, 1 key ready
}
