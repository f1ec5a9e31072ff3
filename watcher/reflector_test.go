package watcher_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/internal/watchtest"
	"github.com/kloop-dev/kloop/watcher"
)

// These tests run Reflector.Run against the scripted watchtest.ListerWatcher
// inside testing/synctest bubbles: time is virtual, and synctest.Wait returns
// once Run is blocked on its next call, so nothing sleeps to wait for it.

type cm = *corev1.ConfigMap

func obj(name, rv string) cm {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func endBookmark(rv string) cm {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: rv,
		Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
	}}
}

var (
	errInternal = apierrors.NewInternalError(errors.New("etcd hiccup"))
	errForbid   = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "bob" cannot list resource "configmaps"`))
	errInvalid  = apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", nil)
)

func statusOf(err error) *metav1.Status {
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		panic("not a status error")
	}
	st := se.ErrStatus
	return &st
}

// recorder collects emitted events as compact strings.
type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) emit(e watcher.Event[cm]) {
	s := e.Type.String()
	if e.Object != nil {
		s += " " + e.Object.Name
	}
	if e.ResourceVersion != "" {
		if e.Object == nil {
			s += " "
		}
		s += "@" + e.ResourceVersion
	}
	r.mu.Lock()
	r.evs = append(r.evs, s)
	r.mu.Unlock()
}

// take returns the events recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.evs
	r.evs = nil
	return out
}

// running is one Run in a bubble.
type running struct {
	t      *testing.T
	lw     *watchtest.ListerWatcher[cm]
	r      *watcher.Reflector[cm]
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs a reflector over a fresh script; call only inside synctest.Test.
func start(t *testing.T, cfg watcher.Options) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0 }
	}
	x := &running{t: t, lw: watchtest.New[cm](), rec: &recorder{}, done: make(chan error, 1)}
	x.r = watcher.NewReflector[cm](x.lw, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	x.cancel = cancel
	go func() { x.done <- x.r.Run(ctx, x.rec.emit) }()
	t.Cleanup(func() { x.stop() })
	return x
}

// stop cancels Run and checks it returned nil.
func (x *running) stop() {
	x.t.Helper()
	x.once.Do(func() {
		x.cancel()
		if err := <-x.done; err != nil {
			x.t.Errorf("Run returned %v after cancel, want nil", err)
		}
	})
}

// call returns the next call Run makes, letting virtual time run (through
// backoff waits) for up to an hour.
func (x *running) call() watchtest.Call {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	c, err := x.lw.NextCall(ctx)
	if err != nil {
		x.t.Fatalf("Run made no List or Watch call within an hour of virtual time (events so far %q)", x.rec.take())
	}
	return c
}

func (x *running) expectCall(want string) {
	x.t.Helper()
	if got := x.call().String(); got != want {
		x.t.Fatalf("call = %s, want %s", got, want)
	}
}

func (x *running) expectNoCall() {
	x.t.Helper()
	synctest.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := x.lw.NextCall(ctx); err == nil {
		x.t.Fatalf("unexpected call %s", c)
	}
}

func (x *running) expectEvents(want ...string) {
	x.t.Helper()
	synctest.Wait()
	if got := x.rec.take(); !slices.Equal(got, want) {
		x.t.Fatalf("events:\n got  %q\n want %q", got, want)
	}
}

func TestReflector_StreamingList_EmitsItemsAsTheyArriveThenWatchesFromItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{})
		x.expectCall(`Watch rv="" sendInitialEvents`)
		w := x.lw.PushWatch()
		w.Add(obj("a", "3"))
		w.Add(obj("b", "5"))
		x.expectEvents("RelistStart", "RelistItem a@3", "RelistItem b@5") // before the snapshot is complete
		w.Action(apiwatch.Bookmark, endBookmark("10"))
		x.expectEvents("RelistDone @10")
		// The streaming list's stream is stopped and a plain watch goes
		// on from the end bookmark.
		x.expectCall(`Watch rv="10"`)
		synctest.Wait()
		if !w.IsStopped() {
			t.Fatalf("the streaming list's watch was not stopped")
		}
		w2 := x.lw.PushWatch()
		w2.Modify(obj("a", "11"))
		w2.Delete(obj("b", "12"))
		x.expectEvents("Modified a@11", "Deleted b@12")
		x.expectNoCall()
		if got := x.r.Status().ResourceVersion; got != "12" {
			t.Fatalf("Status().ResourceVersion = %q, want 12", got)
		}
		x.stop()
		if !w.IsStopped() {
			t.Fatalf("Run returned without stopping its watch")
		}
	})
}

func TestReflector_StreamingRejected_FallsBackToPaginatedListThenWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{})
		x.expectCall(`Watch rv="" sendInitialEvents`)
		x.lw.PushWatchError(errInvalid)
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3")}, ResourceVersion: "10", Continue: "c1"}, nil)
		x.expectCall(`List rv="" limit=500 continue="c1"`)
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("b", "4")}, ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		x.expectEvents("RelistStart", "RelistItem a@3", "RelistItem b@4", "RelistDone @10")
		if err := x.r.LastError(); err != nil {
			t.Fatalf("LastError after the fallback synced = %v, want nil", err)
		}
	})
}

func TestReflector_ListErrors_BackOffInVirtualTimeAndSurface(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []error
		x := start(t, watcher.Options{InitialList: watcher.InitialListPaginated, OnError: func(err error) { seen = append(seen, err) }})
		x.expectCall(`List rv="0" limit=500`)
		t0 := time.Now()
		x.lw.PushList(watcher.ListPage[cm]{}, errInternal)
		x.expectCall(`List rv="0" limit=500`)
		if d := time.Since(t0); d != 800*time.Millisecond {
			t.Fatalf("first retry after %v, want 800ms (rand 0)", d)
		}
		if !apierrors.IsInternalError(x.r.LastError()) {
			t.Fatalf("LastError = %v, want the internal error", x.r.LastError())
		}
		t1 := time.Now()
		x.lw.PushList(watcher.ListPage[cm]{}, errForbid)
		x.expectCall(`List rv="0" limit=500`)
		if d := time.Since(t1); d != 1600*time.Millisecond {
			t.Fatalf("second retry after %v, want 1.6s", d)
		}
		err := x.r.LastError()
		var oe *watcher.OpError
		if !apierrors.IsForbidden(err) || !errors.As(err, &oe) || oe.Op != watcher.OpList {
			t.Fatalf("LastError = %v, want a list *OpError that is forbidden", err)
		}
		if len(seen) != 2 || !apierrors.IsInternalError(seen[0]) || !apierrors.IsForbidden(seen[1]) {
			t.Fatalf("OnError saw %v, want the 500 then the 403", seen)
		}
		x.lw.PushList(watcher.ListPage[cm]{ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		if err := x.r.LastError(); err != nil {
			t.Fatalf("LastError after a completed list = %v, want nil", err)
		}
	})
}

func TestReflector_CancelDuringBackoff_ReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{InitialList: watcher.InitialListPaginated})
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{}, errInternal)
		synctest.Wait()
		t0 := time.Now()
		x.stop()
		if d := time.Since(t0); d != 0 {
			t.Fatalf("Run took %v of virtual time to return after cancel, want 0", d)
		}
	})
}

func TestReflector_Watch410_RelistsAtTheLastRVAfterBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{InitialList: watcher.InitialListPaginated})
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3")}, ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		w := x.lw.PushWatch()
		w.Add(obj("b", "11"))
		w.Error(statusOf(apierrors.NewResourceExpired("too old resource version")))
		x.expectCall(`List rv="11"`)
		if !w.IsStopped() {
			t.Fatalf("the expired watch was not stopped")
		}
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("b", "11")}, ResourceVersion: "20"}, nil)
		x.expectCall(`Watch rv="20"`)
		x.expectEvents("RelistStart", "RelistItem a@3", "RelistDone @10", "Added b@11", "RelistStart", "RelistItem b@11", "RelistDone @20")
		if err := x.r.LastError(); err != nil {
			t.Fatalf("a 410 is recovered, not an error; LastError = %v", err)
		}
	})
}

func TestReflector_WatchClosed_RewatchesFromTheLastRVWithoutRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{InitialList: watcher.InitialListPaginated})
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		w := x.lw.PushWatch()
		w.Add(obj("a", "11"))
		w.Action(apiwatch.Bookmark, obj("", "15"))
		synctest.Wait()
		w.Stop() // the server ends the stream
		x.expectCall(`Watch rv="15"`)
		x.expectEvents("RelistStart", "RelistDone @10", "Added a@11", "Bookmark @15")
		if calls := x.lw.Calls(); len(calls) != 3 {
			t.Fatalf("calls %v, want list, watch, watch", calls)
		}
	})
}

func TestReflector_WatchClosedAtOnce_BacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{InitialList: watcher.InitialListPaginated})
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		x.lw.PushWatch().Stop()
		t0 := time.Now()
		x.expectCall(`Watch rv="10"`)
		if d := time.Since(t0); d < 800*time.Millisecond {
			t.Fatalf("re-watch after %v, want a backoff of at least 800ms", d)
		}
		if !errors.Is(x.r.LastError(), watcher.ErrWatchClosedEarly) {
			t.Fatalf("LastError = %v, want ErrWatchClosedEarly", x.r.LastError())
		}
	})
}

func TestReflector_StreamingSilentBeforeEnd_FallsBackAfterTheIdleLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{})
		x.expectCall(`Watch rv="" sendInitialEvents`)
		w := x.lw.PushWatch()
		t0 := time.Now()
		w.Add(obj("a", "3"))
		synctest.Wait()
		time.Sleep(10 * time.Second) // advances virtual time; an event resets the idle limit
		w.Add(obj("b", "4"))
		x.expectCall(`List rv="0" limit=500`)
		if d := time.Since(t0); d != 40*time.Second {
			t.Fatalf("fell back after %v, want 40s (30s after the last event)", d)
		}
		if !w.IsStopped() {
			t.Fatalf("the abandoned stream was not stopped")
		}
		// Its items were emitted; the paginated list that replaces it
		// begins a snapshot of its own.
		x.expectEvents("RelistStart", "RelistItem a@3", "RelistItem b@4")
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3")}, ResourceVersion: "20"}, nil)
		x.expectEvents("RelistStart", "RelistItem a@3", "RelistDone @20")
	})
}

func TestReflector_SecondRunWhileRunning_ReturnsErrAlreadyRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{})
		x.call()
		if err := x.r.Run(t.Context(), func(watcher.Event[cm]) {}); !errors.Is(err, watcher.ErrAlreadyRunning) {
			t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
		}
	})
}

func TestReflector_RunAgain_StartsWithASnapshotAtTheLastRV(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{})
		x.expectCall(`Watch rv="" sendInitialEvents`)
		w := x.lw.PushWatch()
		w.Action(apiwatch.Bookmark, endBookmark("10"))
		x.expectCall(`Watch rv="10"`)
		x.lw.PushWatch().Add(obj("a", "11"))
		synctest.Wait()
		x.stop()
		x.rec.take()

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- x.r.Run(ctx, x.rec.emit) }()
		x.expectCall(`Watch rv="11" sendInitialEvents`)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("second Run returned %v", err)
		}
	})
}

func TestReflector_NilWatchWithoutError_IsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := watcher.Funcs[cm]{
			ListFunc: func(context.Context, metav1.ListOptions) (watcher.ListPage[cm], error) {
				return watcher.ListPage[cm]{ResourceVersion: "1"}, nil
			},
			WatchFunc: func(context.Context, metav1.ListOptions) (apiwatch.Interface, error) { return nil, nil },
		}
		errs := make(chan error, 10)
		r := watcher.NewReflector[cm](lw, watcher.Options{InitialList: watcher.InitialListPaginated, Logger: quiet(),
			Registerer: prometheus.NewRegistry(), OnError: func(err error) { errs <- err }})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx, func(watcher.Event[cm]) {}) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if len(errs) == 0 || !errors.Is(<-errs, watcher.ErrUnexpectedObject) {
			t.Fatalf("a nil watch was not reported as ErrUnexpectedObject")
		}
	})
}

// The reflector must not keep emitted objects alive: after the consumer
// drops one, nothing in Run (which is blocked on the next event) holds it.
func TestReflector_HoldsNoReferenceToEmittedObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := start(t, watcher.Options{})
		x.expectCall(`Watch rv="" sendInitialEvents`)
		w := x.lw.PushWatch()
		var refs []weak.Pointer[corev1.ConfigMap]
		send := func(typ apiwatch.EventType, name, rv string) {
			o := obj(name, rv)
			refs = append(refs, weak.Make(o))
			w.Action(typ, o)
		}
		send(apiwatch.Added, "a", "3")
		send(apiwatch.Added, "b", "4")
		w.Action(apiwatch.Bookmark, endBookmark("10"))
		x.expectCall(`Watch rv="10"`)
		w = x.lw.PushWatch()
		send(apiwatch.Modified, "a", "11")
		synctest.Wait()
		if got := len(x.rec.take()); got != 5 {
			t.Fatalf("%d events emitted, want 5", got)
		}
		runtime.GC()
		runtime.GC()
		for i, p := range refs {
			if p.Value() != nil {
				t.Fatalf("object %d is still reachable after emit", i)
			}
		}
	})
}

func TestReflector_Metrics_CountCallsAndEventsByType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		x := start(t, watcher.Options{Name: "cms", Registerer: reg})
		x.expectCall(`Watch rv="" sendInitialEvents`)
		x.lw.PushWatchError(errInvalid)
		x.expectCall(`List rv="0" limit=500`)
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3"), obj("b", "4")}, ResourceVersion: "10"}, nil)
		x.expectCall(`Watch rv="10"`)
		w := x.lw.PushWatch()
		w.Add(obj("c", "12"))
		w.Error(statusOf(apierrors.NewTooManyRequests("slow down", 1)))
		x.expectCall(`Watch rv="12"`)

		for _, tc := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"kloop_reflector_lists_total", nil, 1},
			{"kloop_reflector_watches_total", nil, 3},
			{"kloop_reflector_errors_total", nil, 1},
			{"kloop_reflector_last_resource_version", nil, 12},
			{"kloop_reflector_events_total", map[string]string{"type": "RelistItem"}, 2},
			{"kloop_reflector_events_total", map[string]string{"type": "RelistDone"}, 1},
			{"kloop_reflector_events_total", map[string]string{"type": "Added"}, 1},
			{"kloop_reflector_events_total", map[string]string{"type": "Deleted"}, 0},
		} {
			if got := metricValue(t, reg, tc.name, tc.labels); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
			}
		}
	})
}

// metricValue returns the value of the series of family name on reg whose
// labels include reflector="cms" and the given ones.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	pairs := []string{"reflector", "cms"}
	for k, v := range labels {
		pairs = append(pairs, k, v)
	}
	return metricstest.Value(t, reg, name, pairs...)
}

// LastError and OnError tell why a reflector has not synced: a 403 from the
// API server stays an *apierrors.StatusError inside the reflector's error.
func TestOpError_KeepsTheServersStatusErrorForErrorsAs(t *testing.T) {
	err := error(&watcher.OpError{Op: watcher.OpList, Resource: "configmaps",
		Err: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("RBAC: access denied"))})
	if !apierrors.IsForbidden(err) {
		t.Errorf("apierrors.IsForbidden(%v) = false, want true", err)
	}
	var oe *watcher.OpError
	if !errors.As(err, &oe) || oe.Op != watcher.OpList {
		t.Errorf("errors.As(%v) gives %+v, want a list OpError", err, oe)
	}
}
