package controller_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/internal/ownwrite"
	"github.com/kloop-dev/kloop/watcher"
)

// writer is a Reconciler that records its keys and, in each call, reports
// the writes queued for that key as the App's client does.
type writer struct {
	gate   chan struct{} // a reconcile of ns/gate waits for it
	mu     sync.Mutex
	calls  []string
	writes map[string][][3]string // key → per call: namespace, name, rv written
}

func (w *writer) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	w.mu.Lock()
	w.calls = append(w.calls, key.String())
	var next [][3]string
	if q := w.writes[key.String()]; len(q) > 0 {
		next, w.writes[key.String()] = q[:1], q[1:]
	}
	w.mu.Unlock()
	if key.Name == "gate" {
		<-w.gate
	}
	for _, x := range next {
		ownwrite.Report(ctx, x[0], x[1], x[2])
	}
	return controller.Result{}, nil
}

// writeNext queues the write key's next reconcile makes.
func (w *writer) writeNext(key, name, rv string) {
	w.mu.Lock()
	if w.writes == nil {
		w.writes = map[string][][3]string{}
	}
	w.writes[key] = append(w.writes[key], [3]string{"ns", name, rv})
	w.mu.Unlock()
}

func (w *writer) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.calls
	w.calls = nil
	return out
}

// skipRig is a controller For ConfigMaps from a scripted source.
type skipRig struct {
	src  *scripted
	rec  *writer
	c    *controller.Controller[cache.Key]
	inf  *informer.Informer[*corev1.ConfigMap]
	reg  *prometheus.Registry
	stop func()
}

func newSkipRig(t *testing.T, opts controller.Options[cache.Key], initial ...*corev1.ConfigMap) *skipRig {
	t.Helper()
	r := &skipRig{src: &scripted{initial: initial, events: make(chan []watcher.Event[*corev1.ConfigMap])}, rec: &writer{gate: make(chan struct{})}, reg: prometheus.NewRegistry()}
	log := slog.New(slog.DiscardHandler)
	inf, err := informer.New[*corev1.ConfigMap](r.src, informer.Options[*corev1.ConfigMap]{Registerer: r.reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	opts.Registerer, opts.Logger = r.reg, log
	r.c, err = controller.New[cache.Key](r.rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.c.Watch(controller.For(inf)); err != nil {
		t.Fatal(err)
	}
	r.inf = inf
	return r
}

// start runs the informer and the controller; writes the first reconciles
// make are queued (writeNext) before it, so that no reconcile runs ahead of
// them.
func (r *skipRig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.inf.Start(ctx) })
	wg.Go(func() { _ = r.c.Start(ctx) })
	r.stop = func() { cancel(); wg.Wait() }
}

func (r *skipRig) send(evs ...[]watcher.Event[*corev1.ConfigMap]) {
	for _, e := range evs {
		r.src.events <- e
		synctest.Wait()
	}
}

func (r *skipRig) expect(t *testing.T, step string, calls []string, skipped float64) {
	t.Helper()
	got := r.rec.take()
	slices.Sort(got)
	if !slices.Equal(got, calls) {
		t.Errorf("%s: reconciled %q, want %q", step, got, calls)
	}
	if got := metricstest.Value(t, r.reg, "kloop_controller_skipped_reconciles_total", "controller", controller.DefaultName); got != skipped {
		t.Errorf("%s: kloop_controller_skipped_reconciles_total = %v, want %v", step, got, skipped)
	}
}

func TestController_SkipsOnlyReconcilesWokenByTheKeysOwnWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSkipRig(t, controller.Options[cache.Key]{}, cm("a", rv("10")), cm("b", rv("10")))
		r.rec.writeNext("ns/a", "a", "11")
		r.start()
		defer r.stop()
		synctest.Wait()
		r.expect(t, "initial list", []string{"ns/a", "ns/b"}, 0)

		r.send(ev(watcher.Modified, cm("a", rv("11"), lbl("own", "1"))))
		r.expect(t, "the event of a's own write", nil, 1)
		st := r.c.Status()
		if st.Skipped != 1 || len(st.Recent) == 0 || st.Recent[0].Outcome != controller.OutcomeSkipped ||
			len(st.Recent[0].Causes) != 1 || st.Recent[0].Causes[0].String() != "For ConfigMap ns/a@11 Updated (own)" {
			t.Errorf("Status after the skip: Skipped %d, latest %+v; want 1 and a skipped record of its own write", st.Skipped, st.Recent)
		}

		r.rec.writeNext("ns/a", "a", "13")
		r.send(ev(watcher.Modified, cm("a", rv("12"), lbl("foreign", "1"))))
		r.expect(t, "a foreign write", []string{"ns/a"}, 1)

		// A relist finds a at 13, a's own write, but a relist's change may
		// fold in others': reconciled.
		r.rec.writeNext("ns/a", "a", "14")
		r.send(snapshot("13", cm("a", rv("13")), cm("b", rv("10"))))
		r.expect(t, "a relist's change to the own write", []string{"ns/a"}, 1)

		// A delete is never skipped, even at the resourceVersion a wrote.
		r.send(ev(watcher.Deleted, cm("a", rv("14"))))
		r.expect(t, "a delete", []string{"ns/a"}, 1)

		// b's reconcile writes a's object: a did not write it.
		r.rec.writeNext("ns/b", "c", "20")
		r.send(ev(watcher.Modified, cm("b", rv("19"))))
		r.expect(t, "a foreign write of b", []string{"ns/b"}, 1)
		r.send(ev(watcher.Added, cm("c", rv("20"))))
		r.expect(t, "c added by b's reconcile", []string{"ns/c"}, 1)

		// b's own write and a foreign one after it, coalesced while the
		// only worker is busy: one reconcile.
		r.rec.writeNext("ns/b", "b", "22")
		r.send(ev(watcher.Modified, cm("b", rv("21"))))
		r.expect(t, "a foreign write of b", []string{"ns/b"}, 1)
		r.send(ev(watcher.Added, cm("gate", rv("30"))))
		r.send(ev(watcher.Modified, cm("b", rv("22"))), ev(watcher.Modified, cm("b", rv("31"))))
		close(r.rec.gate)
		synctest.Wait()
		r.expect(t, "b's own write and a foreign one coalesced", []string{"ns/b", "ns/gate"}, 1)
	})
}

func TestController_ReconcileOwnWritesTurnsTheSkipOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSkipRig(t, controller.Options[cache.Key]{ReconcileOwnWrites: true}, cm("a", rv("10")))
		r.rec.writeNext("ns/a", "a", "11")
		r.start()
		defer r.stop()
		synctest.Wait()
		r.expect(t, "initial list", []string{"ns/a"}, 0)
		r.send(ev(watcher.Modified, cm("a", rv("11"))))
		r.expect(t, "the event of a's own write", []string{"ns/a"}, 0)
	})
}

func TestController_ASkipIsTracedAsASpanWithOutcomeSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		r := newSkipRig(t, controller.Options[cache.Key]{Tracer: tp.Tracer("test")}, cm("a", rv("10")))
		r.rec.writeNext("ns/a", "a", "11")
		r.start()
		defer r.stop()
		synctest.Wait()
		r.rec.take() // the initial list's
		r.send(ev(watcher.Modified, cm("a", rv("11"))))
		r.expect(t, "the event of a's own write", nil, 1)
		var outcomes []string
		for _, s := range spans.Ended() {
			for _, a := range s.Attributes() {
				if a.Key == "kloop.outcome" {
					outcomes = append(outcomes, a.Value.AsString())
				}
			}
		}
		if want := []string{controller.OutcomeSuccess, controller.OutcomeSkipped}; !slices.Equal(outcomes, want) {
			t.Errorf("span outcomes %q, want %q: the reconcile of the initial list, then the skip", outcomes, want)
		}
	})
}
