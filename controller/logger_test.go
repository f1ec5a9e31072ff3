package controller_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

func TestLoggerFrom_ReconcileLogsCarryControllerKeyAndAReconcileIDOfTheirCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		rec := controller.ReconcilerFunc[cache.Key](func(ctx context.Context, key cache.Key) (controller.Result, error) {
			calls++
			controller.LoggerFrom(ctx).Info("reconciling")
			if calls == 1 {
				return controller.Result{}, errors.New("once")
			}
			return controller.Result{}, nil
		})
		var logs syncBuffer
		c, err := controller.New[cache.Key](rec, controller.Options[cache.Key]{
			Name:       "logs",
			Registerer: prometheus.NewRegistry(),
			Logger:     slog.New(slog.NewJSONHandler(&logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		c.Enqueue(cache.Key{Namespace: "ns", Name: "a"})
		time.Sleep(time.Second) // fake time: past the first retry's back-off
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		var ours, failed []map[string]any
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("log line %q: %v", sc.Text(), err)
			}
			switch {
			case rec["msg"] == "reconciling":
				ours = append(ours, rec)
			case strings.HasPrefix(rec["msg"].(string), "Reconcile failed"):
				failed = append(failed, rec)
			}
		}
		if len(ours) != 2 || len(failed) != 1 {
			t.Fatalf("%d reconcile lines and %d failure lines, want 2 and 1:\n%s", len(ours), len(failed), logs.String())
		}
		for _, rec := range ours {
			for k, want := range map[string]string{"controller": "logs", "key": "ns/a", "namespace": "ns", "name": "a"} {
				if rec[k] != want {
					t.Errorf("reconcile's log line has %s=%v, want %q: %v", k, rec[k], want, rec)
				}
			}
		}
		id1, _ := ours[0]["reconcileID"].(string)
		id2, _ := ours[1]["reconcileID"].(string)
		if id1 == "" || id2 == "" || id1 == id2 {
			t.Errorf("reconcile IDs %q and %q: want one per call, each different", id1, id2)
		}
		if failed[0]["reconcileID"] != id1 {
			t.Errorf("the failure line has reconcileID %v, want the failed call's %q", failed[0]["reconcileID"], id1)
		}
	})
}

func TestLoggerFrom_IsSlogDefaultOutsideAReconcile(t *testing.T) {
	if got := controller.LoggerFrom(context.Background()); got != slog.Default() {
		t.Errorf("LoggerFrom(Background) = %p, want slog.Default() %p", got, slog.Default())
	}
	log := slog.New(slog.DiscardHandler)
	if got := controller.LoggerFrom(controller.WithLogger(context.Background(), log)); got != log {
		t.Errorf("LoggerFrom(WithLogger(log)) = %p, want log %p", got, log)
	}
}
