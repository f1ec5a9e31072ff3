package controller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/watcher"
)

// causeRecorder is a Reconciler that records the causes of each call.
type causeRecorder[K comparable] struct {
	mu    sync.Mutex
	calls [][]controller.Cause
	total []int
	fail  func(call int) (controller.Result, error)
}

func (r *causeRecorder[K]) Reconcile(ctx context.Context, _ K) (controller.Result, error) {
	causes, total := controller.CausesFrom(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, causes)
	r.total = append(r.total, total)
	n := len(r.calls)
	r.mu.Unlock()
	if r.fail != nil {
		return r.fail(n)
	}
	return controller.Result{}, nil
}

// take returns the causes of the calls since the last take, each call's
// formatted and joined by "; ".
func (r *causeRecorder[K]) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		s := make([]string, len(c))
		for i, x := range c {
			s[i] = x.String()
		}
		out = append(out, strings.Join(s, "; "))
	}
	r.calls, r.total = nil, nil
	return out
}

func TestController_CausesNameTheChangesMergedIntoAReconcileAndMarkOwnWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{initial: []*corev1.ConfigMap{cm("a", rv("10"))}, events: make(chan []watcher.Event[*corev1.ConfigMap])}
		reg := prometheus.NewRegistry()
		logs := &syncBuffer{}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Registerer: reg, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		rec := &causeRecorder[cache.Key]{}
		own := func(ns, name, rv string) bool { return ns == "ns" && name == "a" && rv == "12" }
		c, err := controller.New[cache.Key](rec, controller.Options[cache.Key]{Registerer: reg, Logger: log, OwnWrite: own})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Watch(controller.For(inf)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = inf.Start(ctx) })
		wg.Go(func() { _ = c.Start(ctx) })
		defer wg.Wait()
		defer cancel()
		synctest.Wait()

		if got, want := rec.take(), []string{"For ConfigMap ns/a@10 Added (replay)"}; !slices.Equal(got, want) {
			t.Errorf("causes of the first reconcile = %q, want %q", got, want)
		}

		src.events <- ev(watcher.Modified, cm("a", rv("11"), lbl("x", "1")))
		synctest.Wait()
		if got, want := rec.take(), []string{"For ConfigMap ns/a@11 Updated"}; !slices.Equal(got, want) {
			t.Errorf("causes after an update = %q, want %q", got, want)
		}

		src.events <- ev(watcher.Modified, cm("a", rv("12"), lbl("x", "2")))
		synctest.Wait()
		if got, want := rec.take(), []string{"For ConfigMap ns/a@12 Updated (own)"}; !slices.Equal(got, want) {
			t.Errorf("causes after the program's own write = %q, want %q", got, want)
		}
		if !strings.Contains(logs.String(), `causes="For ConfigMap ns/a@12 Updated (own)"`) {
			t.Errorf("the Reconciled debug line does not carry the causes; logs:\n%s", logs)
		}

		src.events <- ev(watcher.Deleted, cm("a", rv("13")))
		synctest.Wait()
		if got, want := rec.take(), []string{"For ConfigMap ns/a@13 Deleted"}; !slices.Equal(got, want) {
			t.Errorf("causes after a delete = %q, want %q", got, want)
		}
	})
}

func TestController_CausesOfRetriesRequeuesAndEnqueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &causeRecorder[string]{fail: func(call int) (controller.Result, error) {
			switch call {
			case 1:
				return controller.Result{}, errors.New("boom")
			case 2:
				return controller.Result{RequeueAfter: time.Second}, nil
			}
			return controller.Result{}, nil
		}}
		h := start[string](t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := rec.take(), []string{"Enqueue", "Retry", "RequeueAfter"}; !slices.Equal(got, want) {
			t.Errorf("causes = %q, want %q", got, want)
		}
		if !strings.Contains(h.logs.String(), `msg="Reconcile failed; will retry" controller=test key=a`) ||
			!strings.Contains(h.logs.String(), `causes=Enqueue`) {
			t.Errorf("the failure is not logged with its causes; logs:\n%s", h.logs)
		}
		h.shutdown()
	})
}

func TestController_CausesAreBoundedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		first := true
		rec := &causeRecorder[string]{fail: func(int) (controller.Result, error) {
			if first {
				first = false
				<-release
			}
			return controller.Result{}, nil
		}}
		h := start[string](t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		synctest.Wait() // the first reconcile holds the key
		for range 100 {
			h.c.Enqueue("a")
		}
		close(release)
		synctest.Wait()
		rec.mu.Lock()
		calls, total := rec.calls, rec.total
		rec.mu.Unlock()
		if len(calls) != 2 {
			t.Fatalf("%d reconciles, want 2: the 100 triggers during the first merge into one", len(calls))
		}
		if total[1] != 100 || len(calls[1]) != 1 {
			t.Errorf("second reconcile: %d causes kept of %d, want 1 kept (identical ones merge) of 100", len(calls[1]), total[1])
		}
		h.shutdown()
	})
}

// namedSource is a custom Source that names its causes by String.
type namedSource struct{ q controller.Queue[string] }

func (s *namedSource) String() string { return "Timer" }

func (s *namedSource) Register(_ string, q controller.Queue[string]) (controller.Subscription, error) {
	s.q = q
	return &staticSub{}, nil
}

func TestController_CustomSourceIsNamedByItsString(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &causeRecorder[string]{}
		reg := prometheus.NewRegistry()
		c, err := controller.New[string](rec, controller.Options[string]{Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		src := &namedSource{}
		if err := c.Watch(src); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		synctest.Wait()
		for i := range 3 {
			src.q.Add(fmt.Sprint("k", i))
		}
		synctest.Wait()
		if got, want := rec.take(), []string{"Timer", "Timer", "Timer"}; !slices.Equal(got, want) {
			t.Errorf("causes = %q, want %q", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

func TestCausesFrom_OutsideAReconcileIsEmpty(t *testing.T) {
	if causes, total := controller.CausesFrom(context.Background()); causes != nil || total != 0 {
		t.Errorf("CausesFrom(Background) = %v, %d, want nil, 0", causes, total)
	}
}

func TestController_FindsAKeyWokenOnlyByItsOwnWritesAsAHotLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{initial: []*corev1.ConfigMap{cm("a", rv("1")), cm("b", rv("2"))}, events: make(chan []watcher.Event[*corev1.ConfigMap], 100)}
		reg := prometheus.NewRegistry()
		logs := &syncBuffer{}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Registerer: reg, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			wrote = map[string]bool{}
			next  = 100
			loops = map[string]int{}
		)
		// a writes itself a new annotation on each of its first 15
		// reconciles; b is changed by someone else as often. Each key
		// has its own budget: the two keys' reconciles interleave in any
		// order.
		rec := controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			if loops[k.Name] >= 15 {
				return controller.Result{}, nil
			}
			loops[k.Name]++
			next++
			v := fmt.Sprint(next)
			wrote[k.Name+"@"+v] = k.Name == "a"
			src.events <- ev(watcher.Modified, cm(k.Name, rv(v), lbl("n", v)))
			return controller.Result{}, nil
		})
		own := func(_, name, rv string) bool {
			mu.Lock()
			defer mu.Unlock()
			return wrote[name+"@"+rv]
		}
		c, err := controller.New[cache.Key](rec, controller.Options[cache.Key]{Name: "loop", Registerer: reg, Logger: log, OwnWrite: own})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Watch(controller.For(inf)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = inf.Start(ctx) })
		wg.Go(func() { _ = c.Start(ctx) })
		defer wg.Wait()
		defer cancel()
		synctest.Wait()

		if v := metricstest.Value(t, reg, "kloop_controller_self_triggered_reconciles_total", "controller", "loop"); v != 15 {
			t.Errorf("self-triggered reconciles = %v, want 15 (a's, after its first)", v)
		}
		hot := c.Status().HotLoops
		if len(hot) != 1 || hot[0].Key != "ns/a" || hot[0].Reconciles != 15 || len(hot[0].Causes) != 1 || !hot[0].Causes[0].Own {
			t.Errorf("HotLoops = %+v, want ns/a alone, 15 reconciles, its latest cause its own write", hot)
		}
		if n := strings.Count(logs.String(), "Hot loop"); n != 1 {
			t.Errorf("%d hot-loop warnings, want 1; logs:\n%s", n, logs)
		}
		if !strings.Contains(logs.String(), "key=ns/a") || !strings.Contains(logs.String(), `causes="For ConfigMap ns/a@`) {
			t.Errorf("the warning does not name the key and what changed; logs:\n%s", logs)
		}

		time.Sleep(31 * time.Second)
		if hot := c.Status().HotLoops; len(hot) != 0 {
			t.Errorf("HotLoops a window after the loop stopped = %+v, want none", hot)
		}
	})
}

// startDebounced runs a controller with Debounce d, fed by a namedSource,
// that records when each reconcile starts.
func startDebounced(t *testing.T, d time.Duration) (*namedSource, func() []time.Duration, func()) {
	t.Helper()
	var (
		mu    sync.Mutex
		t0    = time.Now()
		calls []time.Duration
	)
	rec := controller.ReconcilerFunc[string](func(ctx context.Context, _ string) (controller.Result, error) {
		mu.Lock()
		calls = append(calls, time.Since(t0))
		mu.Unlock()
		return controller.Result{}, nil
	})
	c, err := controller.New[string](rec, controller.Options[string]{Debounce: d, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := &namedSource{}
	if err := c.Watch(src); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	synctest.Wait()
	got := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	return src, got, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}
}

func TestController_DebounceReconcilesABurstOnceAfterItsLastTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, calls, stop := startDebounced(t, time.Second)
		defer stop()
		for range 5 {
			src.q.Add("a")
			time.Sleep(300 * time.Millisecond)
		}
		// The last trigger came at 1.2 s.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, want := calls(), []time.Duration{2200 * time.Millisecond}; !slices.Equal(got, want) {
			t.Errorf("reconciles at %v, want %v: once, Debounce after the last trigger", got, want)
		}
	})
}

func TestController_DebounceStillRunsAKeyThatNeverPausesEveryTenTimesDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, calls, stop := startDebounced(t, time.Second)
		defer stop()
		time.Sleep(50 * time.Millisecond)
		// A trigger every 300 ms for 25 s, never at the instant of a
		// reconcile.
		for range 84 {
			src.q.Add("a")
			time.Sleep(300 * time.Millisecond)
		}
		synctest.Wait()
		got := calls()
		// Held from 0.05 s: run at 10.05 s; the next trigger (10.25 s) is
		// held until 20.25 s; then quiet after the last (24.95 s).
		want := []time.Duration{10050 * time.Millisecond, 20250 * time.Millisecond}
		if !slices.Equal(got, want) {
			t.Errorf("reconciles at %v, want %v: every DebounceBound × Debounce while triggers never pause", got, want)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := calls(); len(got) != 3 || got[2] != 25950*time.Millisecond {
			t.Errorf("reconciles at %v, want a third one Debounce after the last trigger (25.95 s)", got)
		}
	})
}

func TestController_DebounceDoesNotHoldRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Duration
		t0 := time.Now()
		var mu sync.Mutex
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, _ string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Since(t0))
			if len(calls) == 1 {
				return controller.Result{}, errors.New("once")
			}
			return controller.Result{}, nil
		})
		h := start[string](t, rec, controller.Options[string]{Debounce: time.Hour})
		h.c.Enqueue("a")
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(calls)
		mu.Unlock()
		if want := []time.Duration{0, 5 * time.Millisecond}; !slices.Equal(got, want) {
			t.Errorf("reconciles at %v, want %v: Enqueue and the retry are not held", got, want)
		}
		h.shutdown()
	})
}

func TestNew_RejectsANegativeDebounce(t *testing.T) {
	_, err := controller.New[string](controller.ReconcilerFunc[string](nil), controller.Options[string]{Debounce: -time.Second, Registerer: prometheus.NewRegistry()})
	if err == nil || !strings.Contains(err.Error(), "Debounce") {
		t.Errorf("New with a negative Debounce = %v, want an error naming Debounce", err)
	}
}

// A source whose keys are turned into another key type (controller.Map,
// as package fleet adds the cluster to each object's key) keeps the
// causes the source gives: the reconcile of the turned key sees the
// object's change, not an anonymous "Source".
func TestMap_KeysKeepTheirSourcesCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{initial: []*corev1.ConfigMap{cm("a", rv("10"))}, events: make(chan []watcher.Event[*corev1.ConfigMap])}
		reg := prometheus.NewRegistry()
		log := slog.New(slog.DiscardHandler)
		inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Registerer: reg, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		type clusterKey struct {
			cluster string
			cache.Key
		}
		var mu sync.Mutex
		var keys []clusterKey
		rec := &causeRecorder[clusterKey]{fail: func(int) (controller.Result, error) { return controller.Result{}, nil }}
		reconcile := controller.ReconcilerFunc[clusterKey](func(ctx context.Context, k clusterKey) (controller.Result, error) {
			mu.Lock()
			keys = append(keys, k)
			mu.Unlock()
			return rec.Reconcile(ctx, k)
		})
		c, err := controller.New[clusterKey](reconcile, controller.Options[clusterKey]{Registerer: reg, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		toEast := func(k cache.Key) clusterKey { return clusterKey{"east", k} }
		if err := c.Watch(controller.Map(controller.For(inf), toEast)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = inf.Start(ctx) })
		wg.Go(func() { _ = c.Start(ctx) })
		defer wg.Wait()
		defer cancel()
		synctest.Wait()

		src.events <- ev(watcher.Modified, cm("a", rv("11"), lbl("x", "1")))
		synctest.Wait()
		if got, want := rec.take(), []string{"For ConfigMap ns/a@10 Added (replay)", "For ConfigMap ns/a@11 Updated"}; !slices.Equal(got, want) {
			t.Errorf("causes through Map = %q, want %q", got, want)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if k != (clusterKey{"east", cache.Key{Namespace: "ns", Name: "a"}}) {
				t.Errorf("reconciled key %v, want east's ns/a", k)
			}
		}
		if len(keys) != 2 {
			t.Errorf("%d reconciles, want 2", len(keys))
		}
	})
}
