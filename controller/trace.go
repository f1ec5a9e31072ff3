package controller

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop/internal/tracing"
)

// spanStart is what every reconcile span of a controller starts with,
// made once in New rather than for each reconcile.
type spanStart struct {
	name       string // "reconcile " + Name
	kind, root trace.SpanStartOption
	controller attribute.KeyValue
}

func newSpanStart(name string) spanStart {
	return spanStart{
		name:       "reconcile " + name,
		kind:       trace.WithSpanKind(trace.SpanKindInternal),
		root:       trace.WithNewRoot(),
		controller: tracing.Controller.String(name),
	}
}

// startSpan starts the span of one reconcile of key with causes s (see
// Options.Tracer).
func (c *Controller[K]) startSpan(ctx context.Context, key K, s *causeSet) (context.Context, trace.Span) {
	// The causes are formatted into one string, each a part of it: one
	// allocation, not one a cause.
	var b strings.Builder
	var ends [causesKept]int
	n := min(s.n, causesKept)
	for i := range n {
		s.at(i).format(&b)
		ends[i] = b.Len()
	}
	all := b.String()
	var buf [causesKept]string
	causes := buf[:n]
	var links []trace.Link
	var latest trace.SpanContext
	for i := range n {
		from := 0
		if i > 0 {
			from = ends[i-1]
		}
		causes[i] = all[from:ends[i]]
		k := s.at(i)
		if !k.Own || c.opts.OwnWriteSpan == nil {
			continue
		}
		if sc := c.opts.OwnWriteSpan(k.Namespace, k.Name, k.ResourceVersion); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{tracing.Cause.String(causes[i])}})
			latest = sc
		}
	}
	self := s.selfTriggered()
	opts := make([]trace.SpanStartOption, 2, 4)
	opts[0] = c.span.kind
	opts[1] = trace.WithAttributes(
		c.span.controller,
		tracing.Key.String(keyString(key)),
		tracing.Causes.StringSlice(causes),
		tracing.CausesTotal.Int(int(s.total)),
		tracing.SelfTriggered.Bool(self),
	)
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	if self && latest.IsValid() {
		// Woken only by its own writes: the next link of their chain.
		ctx = trace.ContextWithSpanContext(ctx, latest)
	} else if trace.SpanContextFromContext(ctx).IsValid() {
		// A new trace, not a child of a span the worker's context carries
		// (WithNewRoot costs two allocations: asked for only when needed).
		opts = append(opts, c.span.root)
	}
	return c.opts.Tracer.Start(ctx, c.span.name, opts...)
}

// done keeps the record of a reconcile in h and ends its span, if any.
func (c *Controller[K]) done(h *history[K], span trace.Span, rec *record[K], res Result, err error) {
	h.add(rec)
	if span == nil {
		return
	}
	if res.RequeueAfter > 0 && err == nil {
		span.SetAttributes(tracing.Outcome.String(rec.outcome), tracing.RequeueAfter.Float64(res.RequeueAfter.Seconds()))
	} else {
		span.SetAttributes(tracing.Outcome.String(rec.outcome))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, rec.err)
	}
	span.End()
}
