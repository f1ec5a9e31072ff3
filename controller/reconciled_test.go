package controller_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv/await"
)

// The Debug record after a successful reconcile is what await.Reconciled
// waits for; a failed reconcile logs none.
func TestController_LogsReconciledForASuccessAndNotForAFailure(t *testing.T) {
	logs := await.NewLogs()
	c, err := controller.New(controller.ReconcilerFunc[string](func(_ context.Context, key string) (controller.Result, error) {
		if key == "bad" {
			return controller.Result{}, controller.TerminalError(errors.New("no"))
		}
		return controller.Result{}, nil
	}), controller.Options[string]{Name: "logged", Logger: slog.New(logs), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "the controller", c.Start)
	c.Enqueue("bad")
	await.Logged(t, "the terminal error of bad", logs, func(r await.Record) bool {
		return r.Level == slog.LevelError && r.Attrs["key"] == "bad"
	})
	c.Enqueue("good")
	rec := await.Reconciled(t, logs, "logged", "good")
	if rec.Level != slog.LevelDebug {
		t.Errorf("the Reconciled record has level %v, want Debug", rec.Level)
	}
	for _, r := range logs.Records() {
		if r.Message == await.ReconciledMessage && r.Attrs["key"] == "bad" {
			t.Errorf("a failed reconcile logged %v", r)
		}
	}
}
