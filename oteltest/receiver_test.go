package oteltest

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/kloop-dev/kloop/testenv/await"
)

// span is what the tests read of one received span.
type span struct {
	name, id, parent string
	attrs            map[string]string
	links            []string // span IDs
}

// receiver is the OpenTelemetry Collector's OTLP receiver, run as a
// library on a loopback port (OTLP/HTTP only), keeping what it receives.
type receiver struct {
	endpoint string // its base URL, http://127.0.0.1:PORT
	mu       sync.Mutex
	spans    []span
	got      await.Signal
}

// startReceiver starts a receiver, shut down when t ends.
func startReceiver(t *testing.T) *receiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the receiver listens on it itself
	r := &receiver{endpoint: "http://" + addr}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	sink, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					sp := span{name: s.Name(), id: s.SpanID().String(), parent: s.ParentSpanID().String(), attrs: map[string]string{}}
					for k, v := range s.Attributes().All() {
						sp.attrs[k] = v.AsString()
					}
					for _, l := range s.Links().All() {
						sp.links = append(sp.links, l.SpanID().String())
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		r.got.Notify()
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
	t.Cleanup(func() {
		if err := rcv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r
}

func (r *receiver) all() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span(nil), r.spans...)
}
