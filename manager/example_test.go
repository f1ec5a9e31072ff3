package manager_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/manager"
)

// A manager serves health probes and runs its runnables until its context
// ends; a real program passes the context from SignalContext and adds an
// informer.Factory and controllers.
func Example() {
	m, err := manager.New(manager.Options{
		HealthAddr: "127.0.0.1:0",
		Gatherer:   prometheus.NewRegistry(),
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	_ = m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-m.AddrReady()
		resp, err := http.Get("http://" + m.Status().HealthAddr.String() + "/healthz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("/healthz: %d %s", resp.StatusCode, body)
		stop()
		return nil
	}))
	fmt.Println("Start returned", m.Start(ctx))
	// Output:
	// /healthz: 200 ok
	// Start returned <nil>
}
