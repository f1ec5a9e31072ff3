package otlp

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// sink is an OTLP/HTTP endpoint on loopback that decodes each request
// with the generated OTLP types.
type sink struct {
	url     string
	mu      sync.Mutex
	reqs    []*collectortrace.ExportTraceServiceRequest
	headers []http.Header
}

func newSink(t *testing.T) *sink {
	s := &sink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gzip: %v", err)
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Errorf("reading the request: %v", err)
		}
		req := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			t.Errorf("the request is no ExportTraceServiceRequest: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// spans are the spans received, by name.
func (s *sink) spans() map[string]*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]*tracepb.Span{}
	for _, r := range s.reqs {
		for _, rs := range r.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					m[sp.Name] = sp
				}
			}
		}
	}
	return m
}

func testExporter(t *testing.T, endpoint string, vars map[string]string) (*exporter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := newExporter(config{endpoint: endpoint, service: "svc", logger: slog.New(slog.DiscardHandler), registerer: reg, getenv: env(vars)})
	if err != nil || e == nil {
		t.Fatalf("newExporter: %v, %v", e, err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return e, reg
}

func anyValues(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func compareValues(t *testing.T, what string, got []*commonpb.KeyValue, want map[string]*commonpb.AnyValue) {
	t.Helper()
	g := anyValues(got)
	if len(g) != len(got) {
		t.Errorf("%s: a key twice in %v", what, got)
	}
	for k, w := range want {
		if !proto.Equal(g[k], w) {
			t.Errorf("%s[%s] = %v, want %v", what, k, g[k], w)
		}
	}
	for k := range g {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has %s = %v, not asked for", what, k, g[k])
		}
	}
}

func TestEncoder_RequestDecodesAsTheOTLPMessageFieldByField(t *testing.T) {
	s := newSink(t)
	e, _ := testExporter(t, s.url, map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test,team=a%20b"})
	tr := e.Tracer("kloop-test", trace.WithInstrumentationVersion("v1.2.3"), trace.WithSchemaURL("https://example.com/schema"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))

	remoteTS, err := trace.ParseTraceState("vendor=value")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: remoteTS, Remote: true})
	start := time.Unix(1700000000, 123)
	long := strings.Repeat("x", 20000) // lengths of two and three bytes
	ctx, root := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "root",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start),
		trace.WithAttributes(attribute.Bool("b", false), attribute.Int("i", -7), attribute.Float64("f", 2.5), attribute.String("s", ""),
			attribute.StringSlice("ss", []string{"a", long}), attribute.Int64Slice("is", []int64{1, 0}), attribute.BoolSlice("bs", []bool{true}),
			attribute.Float64Slice("fs", []float64{0.5}), attribute.String("replaced", "old")),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "cause")}}))
	root.SetAttributes(attribute.String("replaced", "new"))
	root.AddEvent("happened", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(attribute.Int("n", 3)))
	root.RecordError(errors.New("it broke"))
	root.SetStatus(codes.Error, "failed")
	_, child := tr.Start(ctx, "child")
	child.SetStatus(codes.Ok, "ignored")
	child.SetStatus(codes.Error, "too late: Ok is final")
	child.End()
	root.End(trace.WithTimestamp(start.Add(time.Second)))
	if err := e.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}

	s.mu.Lock()
	if len(s.reqs) != 1 || len(s.reqs[0].ResourceSpans) != 1 || len(s.reqs[0].ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("got %v, want one request with one resource and one scope", s.reqs)
	}
	rs := s.reqs[0].ResourceSpans[0]
	if h := s.headers[0].Get("Content-Type"); h != "application/x-protobuf" {
		t.Errorf("Content-Type %q", h)
	}
	s.mu.Unlock()
	compareValues(t, "resource", rs.Resource.Attributes, map[string]*commonpb.AnyValue{
		"service.name": str("svc"), "deployment.environment": str("test"), "team": str("a b"),
		"telemetry.sdk.name": str("kloop"), "telemetry.sdk.language": str("go"), "telemetry.sdk.version": anyValues(rs.Resource.Attributes)["telemetry.sdk.version"],
	})
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != "kloop-test" || ss.Scope.Version != "v1.2.3" || ss.SchemaUrl != "https://example.com/schema" {
		t.Errorf("scope %v, schema %q", ss.Scope, ss.SchemaUrl)
	}
	compareValues(t, "scope", ss.Scope.Attributes, map[string]*commonpb.AnyValue{"scope.attr": str("x")})

	spans := s.spans()
	r, c := spans["root"], spans["child"]
	if r == nil || c == nil {
		t.Fatalf("got spans %v, want root and child", spans)
	}
	rsc, csc := root.SpanContext(), child.SpanContext()
	tid, rid, cid, remoteID := rsc.TraceID(), rsc.SpanID(), csc.SpanID(), remote.SpanID()
	if tid != remote.TraceID() || string(r.TraceId) != string(tid[:]) || string(c.TraceId) != string(tid[:]) {
		t.Errorf("trace IDs %x, %x; want the remote parent's %x", r.TraceId, c.TraceId, remote.TraceID())
	}
	if string(r.SpanId) != string(rid[:]) || string(r.ParentSpanId) != string(remoteID[:]) || string(c.SpanId) != string(cid[:]) || string(c.ParentSpanId) != string(rid[:]) {
		t.Errorf("root %x (parent %x), child %x (parent %x); want %x (%x), %x (%x)", r.SpanId, r.ParentSpanId, c.SpanId, c.ParentSpanId, rid, remoteID, cid, rid)
	}
	if r.TraceState != "vendor=value" {
		t.Errorf("trace state %q, want the parent's", r.TraceState)
	}
	if r.Flags != 0x301 || c.Flags != 0x101 {
		t.Errorf("flags %#x, %#x; want 0x301 (sampled, remote parent) and 0x101 (sampled, local parent)", r.Flags, c.Flags)
	}
	if r.Kind != tracepb.Span_SPAN_KIND_SERVER || c.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("kinds %v, %v", r.Kind, c.Kind)
	}
	if r.StartTimeUnixNano != uint64(start.UnixNano()) || r.EndTimeUnixNano != uint64(start.Add(time.Second).UnixNano()) {
		t.Errorf("root times %d..%d", r.StartTimeUnixNano, r.EndTimeUnixNano)
	}
	if c.StartTimeUnixNano == 0 || c.EndTimeUnixNano < c.StartTimeUnixNano {
		t.Errorf("child times %d..%d", c.StartTimeUnixNano, c.EndTimeUnixNano)
	}
	arr := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	b := func(v bool) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}
	}
	i := func(v int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}
	}
	f := func(v float64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}
	}
	compareValues(t, "root", r.Attributes, map[string]*commonpb.AnyValue{
		"b": b(false), "i": i(-7), "f": f(2.5), "s": str(""), "ss": arr(str("a"), str(long)), "is": arr(i(1), i(0)),
		"bs": arr(b(true)), "fs": arr(f(0.5)), "replaced": str("new"),
	})
	if len(r.Events) != 2 || r.Events[0].Name != "happened" || r.Events[0].TimeUnixNano != uint64(start.Add(time.Millisecond).UnixNano()) || r.Events[1].Name != "exception" {
		t.Fatalf("events %v", r.Events)
	}
	compareValues(t, "event", r.Events[0].Attributes, map[string]*commonpb.AnyValue{"n": i(3)})
	compareValues(t, "exception", r.Events[1].Attributes, map[string]*commonpb.AnyValue{"exception.type": str("*errors.errorString"), "exception.message": str("it broke")})
	if len(r.Links) != 1 || string(r.Links[0].SpanId) != string(remoteID[:]) || r.Links[0].TraceState != "vendor=value" || r.Links[0].Flags != 0x301 {
		t.Fatalf("links %v", r.Links)
	}
	compareValues(t, "link", r.Links[0].Attributes, map[string]*commonpb.AnyValue{"why": str("cause")})
	if r.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || r.Status.GetMessage() != "failed" {
		t.Errorf("root status %v", r.Status)
	}
	if c.Status.GetCode() != tracepb.Status_STATUS_CODE_OK || c.Status.GetMessage() != "" {
		t.Errorf("child status %v, want Ok without a message", c.Status)
	}
	if r.DroppedAttributesCount != 0 || r.DroppedEventsCount != 0 || r.DroppedLinksCount != 0 {
		t.Errorf("dropped %d, %d, %d", r.DroppedAttributesCount, r.DroppedEventsCount, r.DroppedLinksCount)
	}
}

func TestSpan_KeepsAtMost128AttributesAndCountsTheRest(t *testing.T) {
	s := newSink(t)
	e, _ := testExporter(t, s.url, nil)
	_, sp := e.Tracer("t").Start(context.Background(), "many")
	for n := range 130 {
		sp.SetAttributes(attribute.Int("a"+strings.Repeat("x", n), n))
	}
	sp.SetAttributes(attribute.Int("a", -1)) // kept: it replaces
	sp.End()
	sp.SetAttributes(attribute.Int("after-end", 1)) // nothing: ended
	if err := e.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := s.spans()["many"]
	if got == nil {
		t.Fatal("no span received")
	}
	if len(got.Attributes) != 128 || got.DroppedAttributesCount != 2 {
		t.Errorf("%d attributes, %d dropped; want 128 and 2", len(got.Attributes), got.DroppedAttributesCount)
	}
	if v := anyValues(got.Attributes)["a"]; v.GetIntValue() != -1 {
		t.Errorf("a = %v, want the later value -1", v)
	}
}

func TestSender_HonoursTheOTELExporterSettings(t *testing.T) {
	s := newSink(t)
	// The traces endpoint is used as it is; gzip and headers as asked.
	e, _ := testExporter(t, "", map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": s.url + "/custom/path",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_HEADERS":         "general=1",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "api-key=se%20cret, x-team = a",
		"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
	})
	_, sp := e.Tracer("t").Start(context.Background(), "one")
	sp.End()
	if err := e.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) != 1 {
		t.Fatalf("%d requests, want 1", len(s.headers))
	}
	h := s.headers[0]
	if h.Get("Api-Key") != "se cret" || h.Get("X-Team") != "a" || h.Get("General") != "" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers %v; want the traces headers only, gzip", h)
	}

	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"}, "http://h:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h:4318/base/"}, "https://h:4318/base/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318"}, "http://h:4318/"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/x"}, "http://h:4318/x"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, "https://localhost:4318/v1/traces"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_INSECURE": "true"}, "http://localhost:4318/v1/traces"},
	} {
		snd, err := newSender("", env(c.vars))
		if err != nil || snd.url != c.want {
			t.Errorf("%v: %v, %v; want %s", c.vars, snd, err, c.want)
		}
	}
	for name, vars := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_COMPRESSION=\"zstd\": set it to gzip or none":               {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=\"soon\": give the export timeout":           {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "soon"},
		"OTEL_EXPORTER_OTLP_ENDPOINT=\"127.0.0.1:4318\": give the OTLP/HTTP receiver's": {"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"},
		"OTEL_TRACES_SAMPLER=\"sometimes\": set it to always_on":                        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_TRACES_SAMPLER": "sometimes"},
		"OTEL_TRACES_SAMPLER_ARG=\"2\": give the fraction":                              {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
	} {
		if _, err := newExporter(config{getenv: env(vars), registerer: prometheus.NewRegistry()}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v, want an error containing %q", vars, err, name)
		}
	}
}
