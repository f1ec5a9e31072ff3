package otlp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop/internal/metricstest"
)

func TestSampler_DecidesRootsByTraceIDAndChildrenByTheirParent(t *testing.T) {
	low := trace.TraceID{15: 1}                                                                         // the lowest ratio bucket
	high := trace.TraceID{8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff} // the highest
	sampledParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: low, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	unsampledParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: low, SpanID: trace.SpanID{1}})
	for _, c := range []struct {
		sampler, arg string
		// root low, root high, child of sampled, child of unsampled
		want [4]bool
	}{
		{"", "", [4]bool{true, true, true, false}},
		{"parentbased_always_on", "", [4]bool{true, true, true, false}},
		{"always_on", "", [4]bool{true, true, true, true}},
		{"always_off", "", [4]bool{false, false, false, false}},
		{"parentbased_always_off", "", [4]bool{false, false, true, false}},
		{"traceidratio", "0.5", [4]bool{true, false, false, true}},
		{"parentbased_traceidratio", "0.5", [4]bool{true, false, true, false}},
		{"traceidratio", "", [4]bool{true, true, true, true}},
		{"traceidratio", "0", [4]bool{false, false, false, false}},
	} {
		s, err := parseSampler(env(map[string]string{"OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg}))
		if err != nil {
			t.Fatalf("%s %s: %v", c.sampler, c.arg, err)
		}
		got := [4]bool{s.sampled(trace.SpanContext{}, low), s.sampled(trace.SpanContext{}, high), s.sampled(sampledParent, high), s.sampled(unsampledParent, low)}
		if got != c.want {
			t.Errorf("%s %s: sampled %v, want %v (root low, root high, child of sampled, child of unsampled)", c.sampler, c.arg, got, c.want)
		}
	}
}

func TestTracer_ParentsSpansAndCarriesUnsampledOnesWithoutRecording(t *testing.T) {
	s := newSink(t)
	e, reg := testExporter(t, s.url, nil)
	tr := e.Tracer("t")
	if e.Tracer("t") != tr || e.Tracer("u") == tr {
		t.Error("Tracer: the same scope should give the same tracer, another scope another")
	}

	ctx, root := tr.Start(context.Background(), "root")
	rsc := root.SpanContext()
	if !root.IsRecording() || !rsc.IsValid() || !rsc.IsSampled() {
		t.Fatalf("root span: recording %v, context %v", root.IsRecording(), rsc)
	}
	_, child := tr.Start(ctx, "child")
	if child.SpanContext().TraceID() != rsc.TraceID() || child.SpanContext().SpanID() == rsc.SpanID() {
		t.Errorf("child %v of %v: want the same trace, another span ID", child.SpanContext(), rsc)
	}
	if got := trace.SpanFromContext(ctx); got != root {
		t.Errorf("the context carries %v, want the root span", got)
	}
	if tp := root.TracerProvider(); tp != e {
		t.Errorf("the span's TracerProvider is %v, want the exporter (users' spans start from it)", tp)
	}
	_, newRoot := tr.Start(ctx, "new root", trace.WithNewRoot())
	if newRoot.SpanContext().TraceID() == rsc.TraceID() {
		t.Error("WithNewRoot kept the parent's trace")
	}

	// A remote parent that was not sampled: its children record nothing,
	// but carry its trace (not sampled) on to theirs.
	unsampledParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, Remote: true})
	uctx, u := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), unsampledParent), "unsampled")
	if u.IsRecording() || u.SpanContext().IsSampled() || u.SpanContext().TraceID() != unsampledParent.TraceID() ||
		u.SpanContext().SpanID() == unsampledParent.SpanID() || !u.SpanContext().IsValid() {
		t.Errorf("child of an unsampled parent: recording %v, context %v", u.IsRecording(), u.SpanContext())
	}
	if !trace.SpanContextFromContext(uctx).Equal(u.SpanContext()) || u.TracerProvider() != e {
		t.Error("the unsampled span is not in its context, or has no TracerProvider")
	}
	_, grandchild := tr.Start(uctx, "unsampled grandchild")
	if grandchild.IsRecording() || grandchild.SpanContext().TraceID() != unsampledParent.TraceID() {
		t.Errorf("grandchild: recording %v, context %v", grandchild.IsRecording(), grandchild.SpanContext())
	}
	u.End()
	grandchild.End()
	child.End()
	newRoot.End()
	root.End()
	if root.IsRecording() {
		t.Error("an ended span still records")
	}
	root.End() // a second End sends nothing more
	if err := e.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := s.spans()
	if len(got) != 3 || got["root"] == nil || got["child"] == nil || got["new root"] == nil {
		t.Errorf("received %d spans (%v), want root, child and new root: unsampled spans are not sent", len(got), got)
	}
	if n := metricstest.Value(t, reg, "kloop_trace_spans_exported_total"); n != 3 {
		t.Errorf("kloop_trace_spans_exported_total = %v, want 3", n)
	}
}

// BenchmarkSpan is one span as a reconcile makes it (five attributes at
// start, the outcome at end), its encoding and its export to a loopback
// endpoint that discards it: a span's whole cost, without the
// controller's. -benchtime 2000x stays below the queue's 2048 spans.
func BenchmarkSpan(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	e, err := newExporter(config{endpoint: srv.URL, service: "bench", logger: slog.New(slog.DiscardHandler), registerer: prometheus.NewRegistry(), getenv: env(nil)})
	if err != nil {
		b.Fatal(err)
	}
	tr := e.Tracer("bench")
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		_, sp := tr.Start(ctx, "reconcile bench", append(start, trace.WithAttributes(
			attribute.String("kloop.controller", "bench"), attribute.String("kloop.key", "ns/name"),
			attribute.StringSlice("kloop.causes", []string{"For ConfigMap ns/name@1 Added"}),
			attribute.Int("kloop.causes.total", 1), attribute.Bool("kloop.self_triggered", i%2 == 0)))...)
		sp.SetAttributes(attribute.String("kloop.outcome", "success"))
		sp.End()
	}
	if err := e.ForceFlush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := e.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}
