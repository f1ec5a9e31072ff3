package controller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop/internal/tracing"
)

// startSpan starts the span of one reconcile of key with causes s (see
// Options.Tracer).
func (c *Controller[K]) startSpan(ctx context.Context, key K, s *causeSet) (context.Context, trace.Span) {
	causes := make([]string, s.n)
	var links []trace.Link
	var latest trace.SpanContext
	for i := range s.n {
		k := s.at(i)
		causes[i] = k.String()
		if !k.Own || c.opts.OwnWriteSpan == nil {
			continue
		}
		if sc := c.opts.OwnWriteSpan(k.Namespace, k.Name, k.ResourceVersion); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{tracing.Cause.String(causes[i])}})
			latest = sc
		}
	}
	self := s.selfTriggered()
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...),
		trace.WithAttributes(
			tracing.Controller.String(c.name),
			tracing.Key.String(keyString(key)),
			tracing.Causes.StringSlice(causes),
			tracing.CausesTotal.Int(int(s.total)),
			tracing.SelfTriggered.Bool(self),
		),
	}
	if self && latest.IsValid() {
		// Woken only by its own writes: the next link of their chain.
		ctx = trace.ContextWithSpanContext(ctx, latest)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	return c.opts.Tracer.Start(ctx, "reconcile "+c.name, opts...)
}

// done keeps the record of a reconcile and ends its span, if any.
func (c *Controller[K]) done(span trace.Span, rec record[K], res Result, err error) {
	c.hist.add(rec)
	if span == nil {
		return
	}
	span.SetAttributes(tracing.Outcome.String(rec.outcome))
	if res.RequeueAfter > 0 && err == nil {
		span.SetAttributes(tracing.RequeueAfter.Float64(res.RequeueAfter.Seconds()))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, rec.err)
	}
	span.End()
}
