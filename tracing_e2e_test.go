package kloop_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// span is what the test reads of one received span.
type span struct {
	name, id, parent string
	attrs            map[string]string
	links            []string // span IDs
}

// receiver is the OpenTelemetry Collector's OTLP receiver, run as a
// library on a loopback port (OTLP/HTTP only), keeping what it receives.
type receiver struct {
	endpoint string
	mu       sync.Mutex
	spans    []span
	got      await.Signal
}

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

// startTracedLooper runs the looping controller (see hotloop_e2e_test.go)
// in an App configured by the OTEL_* environment, as a user's would be.
func startTracedLooper(t *testing.T, name string, opts func(*controller.Options[cache.Key])) (*looper, *prometheus.Registry, string) {
	t.Helper()
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, name)
	reg := prometheus.NewRegistry()
	app, err := kloop.New(env.Config, kloop.Options{Name: name, Namespace: ns, Logger: slog.New(slog.DiscardHandler), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	l := &looper{cms: kloop.Objects[*corev1.ConfigMap](app)}
	if _, err := kloop.NewController(app, name, l.Reconcile).For(l.cms).WithOptions(opts).Complete(); err != nil {
		t.Fatal(err)
	}
	runApp(t, app)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "spin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return l, reg, ns
}

func TestApp_TracesReconcilesTheirCausesAndTheirWritesToAnOTLPReceiver(t *testing.T) {
	r := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	// With the skip on (the default), the event of the looper's write does
	// not run it again: the skip is the span of the write's child.
	_, _, ns := startTracedLooper(t, "traced", func(*controller.Options[cache.Key]) {})
	key := ns + "/spin"

	// The first reconcile names the ConfigMap's creation; its write is
	// its child; the reconcile that write wakes links to the write and is
	// its child too: the loop is one chain.
	var first, write, next span
	await.Until(t, "a reconcile span, its write's span, and the reconcile the write woke", r.got.Changed, func() bool {
		spans := r.all()
		byID := map[string]span{}
		for _, s := range spans {
			byID[s.id] = s
		}
		for _, s := range spans {
			if s.name != "reconcile traced" || s.attrs["kloop.key"] != key || s.attrs["kloop.self_triggered"] != "true" || len(s.links) == 0 {
				continue
			}
			w, ok := byID[s.links[0]]
			if !ok || w.parent == "" {
				continue
			}
			p, ok := byID[w.parent]
			if !ok {
				continue
			}
			first, write, next = p, w, s
			return true
		}
		return false
	})
	if first.name != "reconcile traced" || first.attrs["kloop.controller"] != "traced" || first.attrs["kloop.outcome"] != "success" {
		t.Errorf("the write's parent %+v is not a successful reconcile of the controller", first)
	}
	if !strings.Contains(first.attrs["kloop.causes"], "For ConfigMap "+key+"@") {
		t.Errorf("the reconcile's causes %q do not name the ConfigMap", first.attrs["kloop.causes"])
	}
	if write.name != "update configmaps" || write.attrs["kloop.write.verb"] != "update" || write.attrs["k8s.namespace.name"] != ns ||
		write.attrs["kloop.write.name"] != "spin" || write.attrs["kloop.write.resource_version"] == "" {
		t.Errorf("the write's span is %+v; want update configmaps of %s/spin with its resourceVersion", write, ns)
	}
	rv := write.attrs["kloop.write.resource_version"]
	if want := "For ConfigMap " + key + "@" + rv + " Updated (own)"; !strings.Contains(next.attrs["kloop.causes"], want) {
		t.Errorf("the reconcile the write woke has causes %q, want %q", next.attrs["kloop.causes"], want)
	}
	if next.attrs["kloop.outcome"] != controller.OutcomeSkipped {
		t.Errorf("the reconcile woken only by its own write has outcome %q, want %q", next.attrs["kloop.outcome"], controller.OutcomeSkipped)
	}
	if next.parent != write.id {
		t.Errorf("the self-triggered reconcile's parent is %s, want the write %s: the loop is not one chain", next.parent, write.id)
	}
	if n, err := strconv.Atoi(next.attrs["kloop.causes.total"]); err != nil || n < 1 {
		t.Errorf("kloop.causes.total = %q", next.attrs["kloop.causes.total"])
	}
}

func TestApp_SendsNoTraceWithoutOTELConfiguration(t *testing.T) {
	r := startReceiver(t)
	// The receiver listens at the default OTLP/HTTP path on this port,
	// but nothing says to use it.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	l, reg, _ := startTracedLooper(t, "untraced", reconcileOwnWrites) // a loop, so that there are reconciles to trace
	await.Until(t, "5 reconciles", l.changed.Changed, func() bool { return l.n.Load() >= 5 })
	if spans := r.all(); len(spans) != 0 {
		t.Errorf("the receiver got %d spans from an App without OTEL configuration", len(spans))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kloop_trace_") {
			t.Errorf("metric %s registered without traces on", mf.GetName())
		}
	}
}
