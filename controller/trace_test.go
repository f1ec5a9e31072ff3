package controller_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop/controller"
)

// spanAttrs is a span's attributes by key.
func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range s.Attributes() {
		m[a.Key] = a.Value
	}
	return m
}

func TestController_SpanCarriesEachCauseTheKeyAndTheOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		release := make(chan struct{})
		rec := &causeRecorder[string]{fail: func(call int) (controller.Result, error) {
			switch call {
			case 1:
				<-release
			case 2:
				return controller.Result{RequeueAfter: time.Hour}, nil
			case 3:
				return controller.Result{}, errors.New("boom")
			}
			return controller.Result{}, nil
		}}
		c, err := controller.New[string](rec, controller.Options[string]{Name: "traced", Registerer: prometheus.NewRegistry(),
			Logger: slog.New(slog.DiscardHandler), Tracer: tp.Tracer("test")})
		if err != nil {
			t.Fatal(err)
		}
		src := &namedSource{}
		if err := c.Watch(src); err != nil {
			t.Fatal(err)
		}
		// Start's context carries a span: each reconcile is still the root
		// of a trace of its own.
		outer := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
		ctx, cancel := context.WithCancel(trace.ContextWithSpanContext(context.Background(), outer))
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		synctest.Wait()
		c.Enqueue("a")
		synctest.Wait() // the first reconcile holds the key
		c.Enqueue("a")
		src.q.Add("a")
		src.q.Add("a")
		close(release)
		synctest.Wait()
		time.Sleep(time.Hour) // the requeue after an hour; fake time in the bubble
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
		calls := rec.calls
		ended := spans.Ended()
		if len(ended) != len(calls) || len(ended) < 3 {
			t.Fatalf("%d spans for %d reconciles, want one a reconcile and at least 3 reconciles", len(ended), len(calls))
		}
		for i, s := range ended {
			a := spanAttrs(s)
			var want []string
			for _, k := range calls[i] {
				want = append(want, k.String())
			}
			if got := a["kloop.causes"].AsStringSlice(); !slices.Equal(got, want) {
				t.Errorf("span %d: kloop.causes %q, want %q (the reconcile's causes)", i, got, want)
			}
			if got := a["kloop.causes.total"].AsInt64(); got != int64(rec.total[i]) {
				t.Errorf("span %d: kloop.causes.total %d, want %d", i, got, rec.total[i])
			}
			if s.Name() != "reconcile traced" || a["kloop.controller"].AsString() != "traced" || a["kloop.key"].AsString() != "a" ||
				s.SpanKind() != trace.SpanKindInternal || s.Parent().IsValid() || s.SpanContext().TraceID() == outer.TraceID() || a["kloop.self_triggered"].AsBool() {
				t.Errorf("span %d: name %q, kind %v, parent %v, attributes %v", i, s.Name(), s.SpanKind(), s.Parent(), a)
			}
		}
		if got := spanAttrs(ended[1])["kloop.causes"].AsStringSlice(); !slices.Equal(got, []string{"Enqueue", "Timer"}) {
			t.Errorf("the second reconcile's span has causes %q, want Enqueue and Timer, merged while the first held the key", got)
		}
		want := []struct {
			outcome string
			status  codes.Code
		}{{controller.OutcomeSuccess, codes.Unset}, {controller.OutcomeRequeueAfter, codes.Unset}, {controller.OutcomeError, codes.Error}}
		for i, w := range want {
			a := spanAttrs(ended[i])
			if a["kloop.outcome"].AsString() != w.outcome || ended[i].Status().Code != w.status {
				t.Errorf("span %d: outcome %q, status %v, want %q, %v", i, a["kloop.outcome"].AsString(), ended[i].Status(), w.outcome, w.status)
			}
		}
		if got := spanAttrs(ended[1])["kloop.requeue_after_seconds"].AsFloat64(); got != 3600 {
			t.Errorf("the RequeueAfter reconcile's span has kloop.requeue_after_seconds %v, want 3600", got)
		}
	})
}
