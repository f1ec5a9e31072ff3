package traceexport

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func TestTracesURL_ABaseURLGetsTheTracesPath(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":           "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":          "http://127.0.0.1:4318/v1/traces",
		"https://otel.example:4318":       "https://otel.example:4318/v1/traces",
		"http://127.0.0.1:4318/v1/traces": "http://127.0.0.1:4318/v1/traces",
		"https://gw.example/otlp/traces":  "https://gw.example/otlp/traces",
	} {
		if got := TracesURL(in); got != want {
			t.Errorf("TracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// The endpoint as Options.TraceEndpoint and --trace-endpoint document it
// (the receiver's base URL) reaches the OpenTelemetry Collector's OTLP/HTTP
// receiver, run as a library on loopback.
func TestEndpoint_AsDocumentedReachesTheCollectorsOTLPReceiver(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the receiver listens on it itself
	var mu sync.Mutex
	var names []string
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	sink, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					names = append(names, s.Name())
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := f.CreateTraces(t.Context(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rcv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	reg := prometheus.NewRegistry()
	exp, err := New(Config{Endpoint: "http://" + addr, Service: "t", Logger: slog.New(slog.DiscardHandler), Registerer: reg, Getenv: env(nil)})
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
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 1 || names[0] != "reconcile probe" {
		t.Errorf("the receiver got spans %q, want [\"reconcile probe\"]", names)
	}
}
