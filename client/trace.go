package client

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/internal/tracing"
)

// WroteSpan returns the span of the traced write that left the object
// namespace/name at resourceVersion, when that write is among the client's
// latest writes (see Wrote); an invalid SpanContext otherwise. A traced
// reconcile woken by that write's watch event links to it.
func (c *Client) WroteSpan(namespace, name, resourceVersion string) trace.SpanContext {
	return c.tracker.wroteSpan(namespace, name, resourceVersion)
}

// startSpan starts the span of one write, a child of the span ctx
// carries, when that one is recording (a traced reconcile's); otherwise
// it starts nothing and returns a nil span. verb names the write: create,
// update, patch, apply, delete.
func (r *Resource[T]) startSpan(ctx context.Context, verb, namespace, name, subresource string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		tracing.Verb.String(verb),
		tracing.Resource.String(r.gvr.GroupResource().String()),
		tracing.Name.String(name),
	}
	if namespace != "" {
		attrs = append(attrs, tracing.Namespace.String(namespace))
	}
	if subresource != "" {
		attrs = append(attrs, tracing.Subresource.String(subresource))
	}
	return parent.TracerProvider().Tracer(tracing.Scope).Start(ctx, verb+" "+r.gvr.Resource,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends span (nil: none) with the write's outcome. A write that
// left obj at a resourceVersion is remembered with its span, for the
// reconcile the write's watch event wakes to link to.
func (r *Resource[T]) endSpan(span trace.Span, obj metav1.Object, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case obj != nil:
		rv := obj.GetResourceVersion()
		span.SetAttributes(tracing.Written.String(rv))
		if obj.GetName() != "" {
			span.SetAttributes(tracing.Name.String(obj.GetName()))
		}
		r.c.tracker.rememberSpan(obj.GetNamespace(), obj.GetName(), rv, span.SpanContext())
	}
	span.End()
}
