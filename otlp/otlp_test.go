package otlp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/internal/tracing"
	"github.com/kloop-dev/kloop/testenv/await"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestNew_SaysWhatToSetForABadQueueSize(t *testing.T) {
	if _, err := newExporter(config{getenv: env(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "lots"})}); err == nil ||
		!strings.Contains(err.Error(), `OTEL_BSP_MAX_QUEUE_SIZE="lots": give a positive whole number`) {
		t.Errorf("a bad queue size: %v", err)
	}
}

// silent accepts connections and never answers.
func silent(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + l.Addr().String()
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestUnreachableReceiver_NeverSlowsOrFailsReconciles(t *testing.T) {
	for _, c := range []struct{ name, reason, endpoint string }{
		{"a listener that never answers", "queue_full", silent(t)},
		{"a closed port", "export_failed", closedPort(t)},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			exp, err := newExporter(config{endpoint: c.endpoint, service: "t", logger: slog.New(slog.DiscardHandler), registerer: reg,
				getenv: env(map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "16", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
					"OTEL_BSP_SCHEDULE_DELAY": "10", "OTEL_BSP_EXPORT_TIMEOUT": "300"})})
			if err != nil || exp == nil {
				t.Fatalf("New: %v, %v", exp, err)
			}
			const keys = 500
			var done atomic.Int64
			var sig await.Signal
			rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
				done.Add(1)
				sig.Notify()
				return controller.Result{}, nil
			})
			ctl, err := controller.New[string](rec, controller.Options[string]{Name: "unreachable", Tracer: exp.Tracer(tracing.Scope), Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { _ = ctl.Start(ctx); close(stopped) }()
			start := time.Now()
			for i := range keys {
				ctl.Enqueue(fmt.Sprintf("k%d", i))
			}
			await.Until(t, fmt.Sprintf("%d reconciles", keys), sig.Changed, func() bool { return done.Load() >= keys })
			took := time.Since(start)
			cancel()
			<-stopped
			st := ctl.Status()
			if st.Failed != 0 || st.Succeeded != keys {
				t.Errorf("%d succeeded, %d failed; want %d, 0", st.Succeeded, st.Failed, keys)
			}
			// One export attempt alone may take the whole export timeout
			// (300 ms): the reconciles never waited for one.
			if p99 := quantile99(st.Duration); p99 > 0.1 {
				t.Errorf("p99 reconcile duration %vs with an unreachable receiver", p99)
			}
			shutdown, cancelShutdown := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancelShutdown()
			_ = exp.Shutdown(shutdown)
			dropped := metricstest.Value(t, reg, "kloop_trace_spans_dropped_total", "reason", c.reason)
			t.Logf("%d reconciles in %v; %v spans dropped (%s)", keys, took.Round(time.Millisecond), dropped, c.reason)
			if dropped <= 0 {
				t.Errorf("kloop_trace_spans_dropped_total{reason=%q} = %v, want the lost spans counted", c.reason, dropped)
			}
		})
	}
}

// quantile99 is the upper bound of the bucket holding the 99th percentile.
func quantile99(h controller.Histogram) float64 {
	for i, n := range h.Buckets {
		if float64(n) >= 0.99*float64(h.Count) {
			return h.UpperBounds[i]
		}
	}
	return 0
}

// BenchmarkReconcile measures what tracing adds to a reconcile: one
// controller reconciling b.N keys, without a Tracer and with one whose
// spans go to a local OTLP/HTTP endpoint that takes and discards them,
// their export included. With b.N above the queue's 2048 spans some may
// be dropped (reported as "dropped"); -benchtime 2000x drops none.
func BenchmarkReconcile(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracing=%v", on), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			opts := controller.Options[int]{Name: "bench", Registerer: reg, Logger: slog.New(slog.DiscardHandler)}
			var exp *exporter
			if on {
				var err error
				exp, err = newExporter(config{endpoint: srv.URL, service: "bench", logger: slog.New(slog.DiscardHandler), registerer: reg, getenv: env(nil)})
				if err != nil {
					b.Fatal(err)
				}
				opts.Tracer = exp.Tracer(tracing.Scope)
			}
			var done atomic.Int64
			var sig await.Signal
			ctl, err := controller.New[int](controller.ReconcilerFunc[int](func(ctx context.Context, key int) (controller.Result, error) {
				done.Add(1)
				sig.Notify()
				return controller.Result{}, nil
			}), opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { _ = ctl.Start(ctx); close(stopped) }()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ctl.Enqueue(i)
			}
			await.Until(b, "every reconcile", sig.Changed, func() bool { return done.Load() >= int64(b.N) })
			if exp != nil {
				// The spans' export is part of their cost: timed, and
				// counted in the allocations.
				if err := exp.ForceFlush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cancel()
			<-stopped
			if exp != nil {
				sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
				_ = exp.Shutdown(sctx)
				c()
				b.ReportMetric(metricstest.Value(b, reg, "kloop_trace_spans_dropped_total", "reason", "queue_full"), "dropped")
			}
		})
	}
}

func TestNew_IsNilWhenNothingAsksForTracesAndOnWithAnEndpoint(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
		t.Setenv(v, "")
	}
	reg := prometheus.NewRegistry()
	opts := kloop.Options{Name: "t", Registry: reg, Logger: slog.New(slog.DiscardHandler)}
	tp, err := New(opts, "")
	if err != nil || tp != nil {
		t.Fatalf("New without an endpoint or OTEL_* = %v, %v; want nil, nil (a nil interface, for Options.Traces)", tp, err)
	}
	if _, err := New(opts, "127.0.0.1:4318"); err == nil || !strings.Contains(err.Error(), "give the OTLP/HTTP receiver's URL") {
		t.Errorf("New with an endpoint that is no URL = %v, want an error saying what to give", err)
	}
	tp, err = New(opts, closedPort(t))
	if err != nil || tp == nil {
		t.Fatalf("New with an endpoint = %v, %v", tp, err)
	}
	// Its metrics are in the App's registry; its Shutdown is the one Run calls.
	if n := metricstest.Value(t, reg, "kloop_trace_spans_dropped_total", "reason", "queue_full"); n != 0 {
		t.Errorf("kloop_trace_spans_dropped_total = %v before any span", n)
	}
	s, ok := tp.(interface{ Shutdown(context.Context) error })
	if !ok {
		t.Fatalf("%T has no Shutdown(context.Context) error: the App would not send its last spans", tp)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
