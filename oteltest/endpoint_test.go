package oteltest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/traceexport"
)

// The endpoint as Options.TraceEndpoint and --trace-endpoint document it
// (the receiver's base URL) reaches the OpenTelemetry Collector's OTLP/HTTP
// receiver.
func TestEndpoint_AsDocumentedReachesTheCollectorsOTLPReceiver(t *testing.T) {
	r := startReceiver(t)
	reg := prometheus.NewRegistry()
	noEnv := func(string) string { return "" }
	exp, err := traceexport.New(traceexport.Config{Endpoint: r.endpoint, Service: "t", Logger: slog.New(slog.DiscardHandler), Registerer: reg, Getenv: noEnv})
	if err != nil || exp == nil {
		t.Fatalf("New: %v, %v", exp, err)
	}
	exp.Start()
	_, sp := exp.Tracer().Start(context.Background(), "reconcile probe")
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exp.Shutdown(ctx); err != nil { // exports what is queued
		t.Fatalf("Shutdown: %v", err)
	}
	var names []string
	for _, s := range r.all() {
		names = append(names, s.name)
	}
	if len(names) != 1 || names[0] != "reconcile probe" {
		t.Errorf("the receiver got spans %q, want [\"reconcile probe\"]", names)
	}
}
