//go:build !benchtrace

package main

import (
	"context"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// startTracing fails: this binary was built without package otlp, as a
// program that does not trace is (-trace builds the traced child with
// -tags benchtrace).
func startTracing(string, *slog.Logger) (trace.Tracer, func(context.Context) (int64, error), error) {
	return nil, nil, errors.New("-trace-endpoint: this binary links no exporter: build it with -tags benchtrace")
}
