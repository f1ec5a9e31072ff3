//go:build benchtrace

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/tracing"
	"github.com/kloop-dev/kloop/otlp"
)

// startTracing makes the kloop child trace its reconciles to endpoint, as
// an App does with OTEL_EXPORTER_OTLP_ENDPOINT set and Options.Traces from
// otlp.New: the default queue and batch (OTEL_BSP_*). stop sends the
// spans still queued and returns how many were dropped.
func startTracing(endpoint string, log *slog.Logger) (trace.Tracer, func(context.Context) (int64, error), error) {
	if err := os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint); err != nil {
		return nil, nil, err
	}
	reg := prometheus.NewRegistry()
	tp, err := otlp.New(kloop.Options{Name: "bench", Logger: log, Registry: reg}, "")
	if err != nil {
		return nil, nil, err
	}
	exp, ok := tp.(interface{ Shutdown(context.Context) error })
	if !ok {
		return nil, nil, fmt.Errorf("otlp.New returned %T: no exporter, or one without Shutdown", tp)
	}
	stop := func(ctx context.Context) (int64, error) {
		if err := exp.Shutdown(ctx); err != nil {
			return 0, fmt.Errorf("sending the last spans: %w", err)
		}
		dropped, err := counterSum(reg, "kloop_trace_spans_dropped_total")
		return int64(dropped), err
	}
	return tp.Tracer(tracing.Scope), stop, nil
}

// counterSum is the sum of the counter name's series in reg.
func counterSum(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}
