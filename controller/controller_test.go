package controller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/workqueue"
)

// harness runs a controller inside a synctest bubble and stops it at the
// end of the bubble's function.
type harness[K comparable] struct {
	t    *testing.T
	c    *controller.Controller[K]
	reg  *prometheus.Registry
	logs *syncBuffer
	stop context.CancelFunc
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start[K comparable](t *testing.T, rec controller.Reconciler[K], opts controller.Options[K]) *harness[K] {
	t.Helper()
	h := &harness[K]{t: t, reg: prometheus.NewRegistry(), logs: &syncBuffer{}, done: make(chan error, 1)}
	if opts.Name == "" {
		opts.Name = "test"
	}
	opts.Registerer = h.reg
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := controller.New(rec, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.done <- c.Start(ctx) }()
	synctest.Wait()
	return h
}

// shutdown stops the controller and fails the test if Start did not return
// nil, or did not return at all.
func (h *harness[K]) shutdown() {
	h.t.Helper()
	h.stop()
	synctest.Wait()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Start returned %v, want nil", err)
		}
	default:
		h.t.Fatal("Start did not return after its context was cancelled: a worker is stuck")
	}
}

func (h *harness[K]) counter(name string, labels ...string) float64 {
	h.t.Helper()
	return metricstest.Value(h.t, h.reg, name, labels...)
}

func TestController_RetriesFailingKeyWithGrowingDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls []time.Time
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if len(calls) <= 5 {
				return controller.Result{}, errors.New("not yet")
			}
			return controller.Result{}, nil
		})
		rl := workqueue.NewControllerRateLimiter[string](5*time.Millisecond, 1000*time.Second, 10, 100, nil) // the default
		h := start(t, rec, controller.Options[string]{RateLimiter: rl})
		h.c.Enqueue("a")
		time.Sleep(time.Second) // fake time: far more than 5+10+20+40+80 ms
		synctest.Wait()

		mu.Lock()
		got := append([]time.Time(nil), calls...)
		mu.Unlock()
		if len(got) != 6 {
			t.Fatalf("Reconcile called %d times, want 6 (5 failures, then success)", len(got))
		}
		for i := 1; i < len(got); i++ {
			want := 5 * time.Millisecond << (i - 1)
			if d := got[i].Sub(got[i-1]); d != want {
				t.Errorf("delay before attempt %d = %v, want %v", i+1, d, want)
			}
		}
		if n := rl.NumRequeues("a"); n != 0 {
			t.Errorf("NumRequeues after success = %d, want 0 (forgotten)", n)
		}
		if v := h.counter("controller_runtime_reconcile_errors_total", "controller", "test"); v != 5 {
			t.Errorf("reconcile_errors_total = %v, want 5", v)
		}
		if v := h.counter("controller_runtime_reconcile_total", "controller", "test", "result", "success"); v != 1 {
			t.Errorf("reconcile_total{result=success} = %v, want 1", v)
		}
		h.shutdown()
	})
}

func TestController_DoesNotRetryTerminalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		cause := errors.New("spec is invalid")
		var returned error
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			calls.Add(1)
			returned = fmt.Errorf("validating: %w", controller.TerminalError(cause))
			return controller.Result{}, returned
		})
		h := start(t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("Reconcile called %d times, want 1", n)
		}
		if !errors.Is(returned, controller.ErrTerminal) || !errors.Is(returned, cause) {
			t.Errorf("errors.Is(%v, ErrTerminal / cause) is false", returned)
		}
		if v := h.counter("controller_runtime_terminal_reconcile_errors_total", "controller", "test"); v != 1 {
			t.Errorf("terminal_reconcile_errors_total = %v, want 1", v)
		}
		if !strings.Contains(h.logs.String(), "spec is invalid") {
			t.Errorf("terminal error not logged; logs:\n%s", h.logs)
		}
		h.shutdown()
	})
}

func TestController_RequeueAfterReconcilesAgainAfterThatTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls []time.Time
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if len(calls) < 3 {
				return controller.Result{RequeueAfter: 7 * time.Second}, nil
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		got := append([]time.Time(nil), calls...)
		mu.Unlock()
		if len(got) != 3 {
			t.Fatalf("Reconcile called %d times, want 3", len(got))
		}
		for i := 1; i < 3; i++ {
			if d := got[i].Sub(got[i-1]); d != 7*time.Second {
				t.Errorf("gap before call %d = %v, want 7s", i+1, d)
			}
		}
		if v := h.counter("controller_runtime_reconcile_total", "controller", "test", "result", "requeue_after"); v != 2 {
			t.Errorf("reconcile_total{result=requeue_after} = %v, want 2", v)
		}
		h.shutdown()
	})
}

// Requeue runs the key again at once, with no back-off and no failure
// counted, and resets the back-off an earlier failure built up.
func TestController_RequeueReconcilesAgainAtOnceWithoutBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type call struct {
			at     time.Time
			causes []string
		}
		var (
			mu    sync.Mutex
			calls []call
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			causes, _ := controller.CausesFrom(ctx)
			var sources []string
			for _, c := range causes {
				sources = append(sources, c.Source)
			}
			calls = append(calls, call{time.Now(), sources})
			switch len(calls) {
			case 1, 4:
				return controller.Result{}, errors.New("boom")
			case 2, 3:
				return controller.Result{Requeue: true}, nil
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 5 {
			t.Fatalf("Reconcile called %d times, want 5", len(calls))
		}
		// error, (5ms back-off) requeue, (at once) requeue, (at once) error,
		// (5ms: the back-off was reset, not 10ms) done.
		for i, want := range []time.Duration{5 * time.Millisecond, 0, 0, 5 * time.Millisecond} {
			if d := calls[i+1].at.Sub(calls[i].at); d != want {
				t.Errorf("gap before call %d = %v, want %v", i+2, d, want)
			}
		}
		for _, i := range []int{2, 3} {
			if !slices.Equal(calls[i].causes, []string{"Requeue"}) {
				t.Errorf("call %d has causes %q, want [Requeue]", i+1, calls[i].causes)
			}
		}
		if v := h.counter("controller_runtime_reconcile_total", "controller", "test", "result", "requeue"); v != 2 {
			t.Errorf("reconcile_total{result=requeue} = %v, want 2", v)
		}
		if v := h.counter("controller_runtime_reconcile_errors_total", "controller", "test"); v != 2 {
			t.Errorf("reconcile_errors_total = %v, want 2 (the requeues are not failures)", v)
		}
		if st := h.c.Status(); st.Requeued != 2 || st.Failed != 2 || st.Succeeded != 1 {
			t.Errorf("Status: %d requeued, %d failed, %d succeeded; want 2, 2, 1", st.Requeued, st.Failed, st.Succeeded)
		}
		h.shutdown()
	})
}

// RequeueAfter and the back-off follow Options.Clock: a key requeued for an
// hour runs again only once a fake clock has been stepped by the hour, and
// a failed key's retry waits for the fake clock too. The bubble only lets
// synctest.Wait tell when the workers are blocked; its own time never
// moves the fake clock.
func TestController_DelaysFollowOptionsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC))
		var (
			mu    sync.Mutex
			calls []time.Time
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, clk.Now())
			switch len(calls) {
			case 1:
				return controller.Result{RequeueAfter: time.Hour}, nil
			case 2:
				return controller.Result{}, errors.New("boom")
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{Clock: clk})
		count := func() int {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return len(calls)
		}
		h.c.Enqueue("a")
		if n := count(); n != 1 {
			t.Fatalf("%d reconciles after Enqueue, want 1", n)
		}
		time.Sleep(2 * time.Hour) // the bubble's time: not the controller's
		if n := count(); n != 1 {
			t.Fatalf("%d reconciles after two hours of real (bubble) time, want 1: RequeueAfter did not follow Options.Clock", n)
		}
		clk.Step(time.Hour - time.Second)
		if n := count(); n != 1 {
			t.Fatalf("%d reconciles a second before the hour, want 1", n)
		}
		clk.Step(time.Second)
		if n := count(); n != 2 {
			t.Fatalf("%d reconciles once the fake clock passed the hour, want 2", n)
		}
		clk.Step(5 * time.Millisecond) // the rate limiter's first delay
		if n := count(); n != 3 {
			t.Fatalf("%d reconciles after the fake clock passed the back-off, want 3", n)
		}
		h.shutdown()
	})
}

func TestController_ErrorWithRequeueAfterIsRetriedWithBackoffAndWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls []time.Time
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if len(calls) == 1 {
				return controller.Result{RequeueAfter: time.Hour}, errors.New("boom")
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 2 || calls[1].Sub(calls[0]) != 5*time.Millisecond {
			t.Fatalf("calls at %v, want two 5ms apart (the rate limiter's first delay, not RequeueAfter)", calls)
		}
		if !strings.Contains(h.logs.String(), "level=WARN") || !strings.Contains(h.logs.String(), "RequeueAfter is ignored") {
			t.Errorf("no warning about RequeueAfter with an error; logs:\n%s", h.logs)
		}
		h.shutdown()
	})
}

func TestController_ErrorWithRequeueIsRetriedWithBackoffAndWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			calls []time.Time
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if len(calls) == 1 {
				return controller.Result{Requeue: true}, errors.New("boom")
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 2 || calls[1].Sub(calls[0]) != 5*time.Millisecond {
			t.Fatalf("calls at %v, want two 5ms apart (the rate limiter's first delay, not at once)", calls)
		}
		if !strings.Contains(h.logs.String(), "level=WARN") || !strings.Contains(h.logs.String(), "as is Requeue") {
			t.Errorf("no warning about Requeue with an error; logs:\n%s", h.logs)
		}
		if v := h.counter("controller_runtime_reconcile_total", "controller", "test", "result", "requeue"); v != 0 {
			t.Errorf("reconcile_total{result=requeue} = %v, want 0: it failed", v)
		}
		h.shutdown()
	})
}

func TestController_RecoversPanicAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			if calls.Add(1) == 1 {
				panic("nil map somewhere")
			}
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{})
		h.c.Enqueue("a")
		time.Sleep(time.Second)
		synctest.Wait()
		if n := calls.Load(); n != 2 {
			t.Errorf("Reconcile called %d times, want 2 (panic, then retry)", n)
		}
		if v := h.counter("controller_runtime_reconcile_panics_total", "controller", "test"); v != 1 {
			t.Errorf("reconcile_panics_total = %v, want 1", v)
		}
		logs := h.logs.String()
		if !strings.Contains(logs, "nil map somewhere") || !strings.Contains(logs, "stack=") {
			t.Errorf("panic not logged with its value and stack; logs:\n%s", logs)
		}
		h.shutdown()
	})
}

func TestController_NeverReconcilesOneKeyConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 8
		var (
			mu       sync.Mutex
			inFlight = map[string]int{}
			maxSame  int
			maxAll   int
			total    int
			hotCalls int
		)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			mu.Lock()
			inFlight[key]++
			maxSame = max(maxSame, inFlight[key])
			all := 0
			for _, n := range inFlight {
				all += n
			}
			maxAll = max(maxAll, all)
			total++
			if key == "hot" {
				hotCalls++
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			inFlight[key]--
			mu.Unlock()
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{Workers: workers})
		for i := range 200 {
			h.c.Enqueue("hot")
			h.c.Enqueue(fmt.Sprintf("cold-%d", i%20))
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if maxSame != 1 {
			t.Errorf("one key was reconciled %d times at once, want at most 1", maxSame)
		}
		if maxAll < 2 || maxAll > workers {
			t.Errorf("at most %d reconciles ran at once; want between 2 and %d workers", maxAll, workers)
		}
		if hotCalls < 10 {
			t.Errorf("hot key reconciled %d times, want it reconciled repeatedly (at least 10)", hotCalls)
		}
		if v := h.counter("controller_runtime_max_concurrent_reconciles", "controller", "test"); v != workers {
			t.Errorf("max_concurrent_reconciles = %v, want %d", v, workers)
		}
		h.shutdown()
	})
}

func TestController_ReconcileTimeoutCancelsContextWithCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 1)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return controller.Result{}, controller.TerminalError(ctx.Err())
		})
		h := start(t, rec, controller.Options[string]{ReconcileTimeout: 3 * time.Second})
		began := time.Now()
		h.c.Enqueue("a")
		cause := <-causes
		if !errors.Is(cause, controller.ErrReconcileTimeout) {
			t.Errorf("cause = %v, want ErrReconcileTimeout", cause)
		}
		if d := time.Since(began); d != 3*time.Second {
			t.Errorf("cancelled after %v, want 3s", d)
		}
		synctest.Wait()
		if v := h.counter("controller_runtime_reconcile_timeouts_total", "controller", "test"); v != 1 {
			t.Errorf("reconcile_timeouts_total = %v, want 1", v)
		}
		h.shutdown()
	})
}

func TestController_StopWaitsForReconcileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		var finished atomic.Bool
		var calls atomic.Int32
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			if calls.Add(1) > 1 {
				return controller.Result{}, nil
			}
			close(entered)
			time.Sleep(5 * time.Second) // slow, but within the drain timeout
			finished.Store(ctx.Err() == nil)
			return controller.Result{}, nil
		})
		h := start(t, rec, controller.Options[string]{DrainTimeout: 10 * time.Second})
		h.c.Enqueue("a")
		<-entered
		h.c.Enqueue("b") // ready, but must not start once stopping
		stopAt := time.Now()
		h.stop()
		if err := <-h.done; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if !finished.Load() {
			t.Error("the reconcile in flight did not finish with a live context")
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d reconciles ran, want 1: a key ready at the stop must not start", n)
		}
		if d := time.Since(stopAt); d != 5*time.Second {
			t.Errorf("Start returned %v after the stop, want 5s (when the reconcile finished)", d)
		}
	})
}

func TestController_DrainTimeoutCancelsReconcileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		cause := make(chan error, 1)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			close(entered)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return controller.Result{}, ctx.Err()
		})
		h := start(t, rec, controller.Options[string]{DrainTimeout: 2 * time.Second})
		h.c.Enqueue("a")
		<-entered
		stopAt := time.Now()
		h.stop()
		if err := <-h.done; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if d := time.Since(stopAt); d != 2*time.Second {
			t.Errorf("Start returned %v after the stop, want the 2s drain timeout", d)
		}
		if c := <-cause; !errors.Is(c, controller.ErrDrainTimeout) {
			t.Errorf("cause = %v, want ErrDrainTimeout", c)
		}
	})
}

func TestController_MaxRetriesDropsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		dropped := make(chan string, 1)
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			calls.Add(1)
			return controller.Result{}, errors.New("always")
		})
		rl := workqueue.NewControllerRateLimiter[string](5*time.Millisecond, 1000*time.Second, 10, 100, nil) // the default
		h := start(t, rec, controller.Options[string]{
			RateLimiter: rl,
			MaxRetries:  5,
			Dropped:     func(ctx context.Context, key string, err error) { dropped <- key },
		})
		h.c.Enqueue("a")
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := calls.Load(); n != 6 {
			t.Errorf("Reconcile called %d times, want 6 (1 + 5 retries)", n)
		}
		select {
		case k := <-dropped:
			if k != "a" {
				t.Errorf("dropped %q, want a", k)
			}
		default:
			t.Error("Dropped was not called")
		}
		if n := rl.NumRequeues("a"); n != 0 {
			t.Errorf("NumRequeues after drop = %d, want 0", n)
		}
		h.shutdown()
	})
}

type staticSource struct {
	sub *staticSub
}

type staticSub struct {
	syncErr error
	removed atomic.Bool
	keys    []string
}

func (s staticSource) Register(name string, q controller.Queue[string]) (controller.Subscription, error) {
	for _, k := range s.sub.keys {
		q.Add(k)
	}
	return s.sub, nil
}

func (s *staticSub) WaitForSync(ctx context.Context) error {
	if s.syncErr != nil {
		<-ctx.Done()
		return fmt.Errorf("never synced: %w (%w)", s.syncErr, context.Cause(ctx))
	}
	return nil
}

func (s *staticSub) Remove() { s.removed.Store(true) }

// Done: the keys were all enqueued at Register.
func (s *staticSub) Done() <-chan struct{} { return closedCh }

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func TestController_SyncFailureStopsStartWithTheSourceError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			calls.Add(1)
			return controller.Result{}, nil
		})
		forbidden := errors.New("configmaps is forbidden")
		c, err := controller.New(rec, controller.Options[string]{
			Registerer: prometheus.NewRegistry(), SyncTimeout: 30 * time.Second,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		sub := &staticSub{syncErr: forbidden, keys: []string{"a"}}
		if err := c.Watch(staticSource{sub}); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		err = c.Start(context.Background())
		if !errors.Is(err, controller.ErrSyncFailed) || !errors.Is(err, forbidden) {
			t.Errorf("Start = %v, want ErrSyncFailed wrapping the source's error", err)
		}
		if d := time.Since(began); d != 30*time.Second {
			t.Errorf("gave up after %v, want the 30s SyncTimeout", d)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("%d reconciles ran before sync, want none", n)
		}
		if !sub.removed.Load() {
			t.Error("subscription not removed after the failed start")
		}
		if err := c.Start(context.Background()); !errors.Is(err, controller.ErrAlreadyStarted) {
			t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
		}
	})
}

func TestController_StartsWorkersOnlyAfterSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var calls atomic.Int32
		rec := controller.ReconcilerFunc[string](func(ctx context.Context, key string) (controller.Result, error) {
			calls.Add(1)
			return controller.Result{}, nil
		})
		c, err := controller.New(rec, controller.Options[string]{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Watch(gatedSource{gate: gate, keys: []string{"a", "b"}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		synctest.Wait()
		if n := calls.Load(); n != 0 {
			t.Fatalf("%d reconciles before the source synced, want 0", n)
		}
		close(gate)
		synctest.Wait()
		if n := calls.Load(); n != 2 {
			t.Errorf("%d reconciles after sync, want 2", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start = %v", err)
		}
	})
}

type gatedSource struct {
	gate chan struct{}
	keys []string
}

func (s gatedSource) Register(name string, q controller.Queue[string]) (controller.Subscription, error) {
	for _, k := range s.keys {
		q.Add(k)
	}
	return gatedSub(s), nil
}

type gatedSub gatedSource

func (s gatedSub) WaitForSync(ctx context.Context) error {
	select {
	case <-s.gate:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (gatedSub) Remove()               {}
func (gatedSub) Done() <-chan struct{} { return closedCh }

var _ controller.Queue[string] = (*workqueue.Queue[string])(nil)

func TestTerminalError_MatchesSentinelAndCause(t *testing.T) {
	cause := errors.New("bad")
	err := controller.TerminalError(cause)
	if !errors.Is(err, controller.ErrTerminal) || !errors.Is(err, cause) {
		t.Errorf("errors.Is(TerminalError(cause), ErrTerminal/cause) = false")
	}
	if errors.Is(cause, controller.ErrTerminal) {
		t.Error("a plain error matches ErrTerminal")
	}
	if !errors.Is(controller.TerminalError(nil), controller.ErrTerminal) {
		t.Error("TerminalError(nil) does not match ErrTerminal")
	}
	if got := err.Error(); got != "terminal error: bad" {
		t.Errorf("Error() = %q", got)
	}
}
