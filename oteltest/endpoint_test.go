package oteltest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/tracing"
	"github.com/kloop-dev/kloop/otlp"
	"github.com/kloop-dev/kloop/testenv/await"
)

// exporter is what otlp.New returns when tracing is on.
type exporter interface {
	trace.TracerProvider
	Shutdown(context.Context) error
}

// newExporter is otlp.New's exporter to endpoint, with no OTEL_*
// variable set.
func newExporter(t *testing.T, endpoint string) exporter {
	t.Helper()
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	tp, err := otlp.New(kloop.Options{Name: "t", Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()}, endpoint)
	if err != nil || tp == nil {
		t.Fatalf("otlp.New(%q) = %v, %v", endpoint, tp, err)
	}
	exp, ok := tp.(exporter)
	if !ok {
		t.Fatalf("otlp.New returned a %T, without Shutdown", tp)
	}
	return exp
}

// The endpoint as otlp.New and --trace-endpoint document it and --trace-endpoint document it
// (the receiver's base URL) reaches the OpenTelemetry Collector's OTLP/HTTP
// receiver.
func TestEndpoint_AsDocumentedReachesTheCollectorsOTLPReceiver(t *testing.T) {
	r := startReceiver(t)
	exp := newExporter(t, r.endpoint)
	_, sp := exp.Tracer(tracing.Scope).Start(context.Background(), "reconcile probe")
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

// A span a reconciler starts from its context (trace.SpanFromContext, as
// a user's code does) is the reconcile span's child and reaches the
// receiver with it.
func TestUsersSpan_NestsUnderTheReconcileSpan(t *testing.T) {
	r := startReceiver(t)
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	exp := newExporter(t, r.endpoint)
	done := make(chan struct{})
	ctl, err := controller.New[string](controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
		_, sp := trace.SpanFromContext(ctx).TracerProvider().Tracer("user").Start(ctx, "user work")
		sp.End()
		close(done)
		return controller.Result{}, nil
	}), controller.Options[string]{Name: "nest", Tracer: exp.Tracer(tracing.Scope), Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = ctl.Start(ctx); close(stopped) }()
	ctl.Enqueue("k")
	await.Closed(t, "the reconcile of k", done)
	cancel()
	<-stopped
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := exp.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	byName := map[string]span{}
	for _, s := range r.all() {
		byName[s.name] = s
	}
	user, rec := byName["user work"], byName["reconcile nest"]
	if user.id == "" || rec.id == "" {
		t.Fatalf("the receiver got spans %v, want \"reconcile nest\" and \"user work\"", byName)
	}
	if user.parent != rec.id {
		t.Errorf("the user's span has parent %q, want the reconcile span %q", user.parent, rec.id)
	}
}
