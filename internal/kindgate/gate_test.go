package kindgate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/kloop-dev/kloop/watcher"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a scripted API server for one kind: whether it is served, and
// every discovery probe, list and watch it was asked.
type server struct {
	mu      sync.Mutex
	served  bool
	fail    error // discovery fails with it
	probes  []time.Time
	lists   int
	watches int
	objects []*corev1.ConfigMap
	open    []*apiwatch.FakeWatcher
}

// remove stops serving the kind, as deleting its CRD does: open watches end.
func (s *server) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served = false
	for _, w := range s.open {
		if !w.IsStopped() {
			w.Stop()
		}
	}
	s.open = nil
}

func (s *server) set(served bool) {
	s.mu.Lock()
	s.served = served
	s.mu.Unlock()
}

func (s *server) probe(context.Context) (bool, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probes = append(s.probes, time.Now())
	if s.fail != nil {
		return false, "", s.fail
	}
	return s.served, "not served", nil
}

func (s *server) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for i := 1; i < len(s.probes); i++ {
		d = append(d, s.probes[i].Sub(s.probes[i-1]))
	}
	return d
}

var notFound = apierrors.NewNotFound(schema.GroupResource{Group: "samplecontroller.k8s.io", Resource: "foos"}, "")

func (s *server) List(context.Context, metav1.ListOptions) (watcher.ListPage[*corev1.ConfigMap], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	if !s.served {
		return watcher.ListPage[*corev1.ConfigMap]{}, notFound
	}
	var items []*corev1.ConfigMap
	for _, o := range s.objects {
		items = append(items, o.DeepCopy())
	}
	return watcher.ListPage[*corev1.ConfigMap]{Items: items, ResourceVersion: "10"}, nil
}

func (s *server) Watch(context.Context, metav1.ListOptions) (apiwatch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watches++
	if !s.served {
		return nil, notFound
	}
	w := apiwatch.NewFake() // open, and quiet, until stopped
	s.open = append(s.open, w)
	return w, nil
}

func (s *server) calls() (lists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, s.watches
}

// logs is a slog handler's output, safe to read while it is written.
type logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logs) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestGate_RunOpensAShutGateOnceDiscoveryServesTheKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{}
		var log logs
		g := New("Foo samplecontroller.k8s.io/v1alpha1", false, "not served", srv.probe)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go g.Run(ctx, log.logger())

		time.Sleep(10 * Interval)
		synctest.Wait()
		if g.Open() {
			t.Fatal("the gate opened while the kind is not served")
		}
		if got := len(srv.probes); got != 11 {
			t.Errorf("%d probes in 10 intervals, want 11 (one at once, then one each %v)", got, Interval)
		}
		if err := g.Err(); err == nil || err.Error() != "waiting for kind Foo samplecontroller.k8s.io/v1alpha1: not served" {
			t.Errorf("Err() = %v, want the kind named as waiting", err)
		}
		if n := log.count("Waiting for kind"); n != 1 {
			t.Errorf("%d \"Waiting for kind\" lines for one reason, want 1:\n%s", n, log.b.String())
		}

		srv.set(true)
		time.Sleep(Interval)
		synctest.Wait()
		if !g.Open() || g.Err() != nil {
			t.Fatalf("the gate is not open one interval after the kind is served: %v", g.Err())
		}
		probes := len(srv.probes)
		time.Sleep(10 * Interval)
		synctest.Wait()
		if len(srv.probes) != probes {
			t.Errorf("an open gate probed %d times; it waits for a list or watch to shut it", len(srv.probes)-probes)
		}
	})
}

func TestGate_ShutOpenShutOpen_BacksOffWhenItFlaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{served: true}
		var log logs
		g := New("Foo samplecontroller.k8s.io/v1alpha1", true, "", srv.probe)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go g.Run(ctx, log.logger())

		// shutThenServe shuts the gate as a 404 does, lets Run probe
		// (not served), serves the kind again and returns how long the
		// gate took to reopen.
		shutThenServe := func() time.Duration {
			synctest.Wait()
			srv.set(false)
			g.Shut("not served")
			start := time.Now()
			synctest.Wait() // Run saw the shut and probed at once
			srv.set(true)
			for !g.Open() {
				time.Sleep(time.Second)
				synctest.Wait()
			}
			return time.Since(start)
		}
		// Lists find the kind gone each time just after it opens (a
		// server's discovery lagging behind a deleted CRD, say): each such
		// shut doubles the wait, up to MaxInterval.
		want := []time.Duration{Interval, 2 * Interval, 4 * Interval, 8 * Interval, MaxInterval, MaxInterval}
		var waits []time.Duration
		for range want {
			waits = append(waits, shutThenServe())
		}
		for i := range want {
			if waits[i] != want[i] {
				t.Fatalf("reopenings came %v after their shuts, want %v", waits, want)
			}
		}
		if n := log.count("Kind served"); n != len(want) {
			t.Errorf("%d \"Kind served\" lines for %d reopenings, want %d", n, len(want), len(want))
		}
		if n := log.count("Kind not served:"); n != len(want) {
			t.Errorf("%d \"Kind not served:\" lines for %d shuts, want %d", n, len(want), len(want))
		}

		// Open long enough, a shut is no flap: back to Interval.
		time.Sleep(flapWindow)
		if w := shutThenServe(); w != Interval {
			t.Errorf("after staying open for %v the reopening took %v, want %v", flapWindow, w, Interval)
		}
	})
}

func TestGate_BacksOffWhileDiscoveryFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{fail: errors.New("connection refused")}
		var log logs
		g := New("Foo samplecontroller.k8s.io/v1alpha1", false, "not served", srv.probe)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go g.Run(ctx, log.logger())
		time.Sleep(10 * MaxInterval)
		synctest.Wait()
		want := []time.Duration{2 * Interval, 4 * Interval, 8 * Interval, MaxInterval, MaxInterval}
		got := srv.gaps()
		if len(got) < len(want) {
			t.Fatalf("probe gaps %v, want them to start %v", got, want)
		}
		for i, w := range want {
			if got[i] != w {
				t.Fatalf("probe gaps %v, want them to start %v", got, want)
			}
		}
		if err := g.Err(); err == nil || !strings.Contains(err.Error(), "discovery failed: connection refused") {
			t.Errorf("Err() = %v, want the discovery failure", err)
		}
		if n := log.count("level=WARN"); n != 1 {
			t.Errorf("%d warnings for one repeated discovery failure, want 1:\n%s", n, log.b.String())
		}
		srv.mu.Lock()
		srv.fail, srv.served = nil, true
		srv.mu.Unlock()
		time.Sleep(MaxInterval)
		synctest.Wait()
		if !g.Open() {
			t.Fatal("the gate did not open once discovery answered")
		}
	})
}

// TestGated_ShutOpenShutOpen runs a real reflector under a gate, as an
// informer does: no list or watch while shut, an empty snapshot for each
// shut, the objects listed at once when the gate opens, and a 404 shuts the
// gate without a reflector error.
func TestGated_ShutOpenShutOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{objects: []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x", ResourceVersion: "5"}}}}
		var log logs
		g := New("Foo samplecontroller.k8s.io/v1alpha1", true, "", srv.probe)
		refl := watcher.NewReflector(Guard[*corev1.ConfigMap](srv, g), watcher.Options{
			Name: "foos", Logger: log.logger(), Registerer: prometheus.NewRegistry(), InitialList: watcher.InitialListPaginated,
		})
		src := Gated[*corev1.ConfigMap](refl, g)

		var mu sync.Mutex
		var snapshots [][]string // the objects of each completed snapshot
		var cur []string
		emit := func(ev watcher.Event[*corev1.ConfigMap]) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Type {
			case watcher.RelistStart:
				cur = []string{}
			case watcher.RelistItem:
				cur = append(cur, ev.Object.Name)
			case watcher.RelistDone:
				snapshots = append(snapshots, cur)
			}
		}
		last := func() (int, []string) {
			mu.Lock()
			defer mu.Unlock()
			if len(snapshots) == 0 {
				return 0, nil
			}
			return len(snapshots), snapshots[len(snapshots)-1]
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, emit) }()
		go g.Run(ctx, log.logger())

		// Open, but the CRD is not there: the first list's 404 shuts the
		// gate, and the informer gets an empty snapshot.
		synctest.Wait()
		if g.Open() {
			t.Fatal("a 404 did not shut the gate")
		}
		if n, objs := last(); n != 1 || len(objs) != 0 {
			t.Fatalf("after the 404: %d snapshots, the last %v; want one, empty", n, objs)
		}
		lists, watches := srv.calls()
		time.Sleep(20 * Interval)
		synctest.Wait()
		if l, w := srv.calls(); l+w != lists+watches {
			t.Errorf("%d lists and watches while the gate was shut, want none", l+w-lists-watches)
		}
		if err := src.LastError(); err == nil || !strings.Contains(err.Error(), "waiting for kind Foo") {
			t.Errorf("LastError() = %v, want the waiting kind", err)
		}

		for round := 1; round <= 2; round++ {
			// Installed: the next probe opens the gate and the reflector
			// lists at once.
			srv.set(true)
			time.Sleep(Interval)
			synctest.Wait()
			if n, objs := last(); n != 2*round || len(objs) != 1 || objs[0] != "x" {
				t.Fatalf("round %d, served: %d snapshots, the last %v; want the listed object", round, n, objs)
			}
			if err := src.LastError(); err != nil {
				t.Errorf("round %d, served: LastError() = %v, want nil", round, err)
			}
			// Deleted a while later: the watch ends and the next one
			// finds 404.
			time.Sleep(flapWindow)
			srv.remove()
			synctest.Wait()
			if n, objs := last(); n != 2*round+1 || len(objs) != 0 {
				t.Fatalf("round %d, deleted: %d snapshots, the last %v; want an empty one", round, n, objs)
			}
			if st := src.(interface{ Status() watcher.Status }).Status(); st.Phase != watcher.PhaseWaiting {
				t.Errorf("round %d, deleted: phase %v, want waiting", round, st.Phase)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if n := log.count("reflector error"); n != 0 {
			t.Errorf("%d reflector errors, want none: a kind not served is waited for quietly:\n%s", n, log.b.String())
		}
	})
}

func TestGuard_A404ShutsTheGateAndWaitsForTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{}
		g := New("Foo samplecontroller.k8s.io/v1alpha1", true, "", srv.probe)
		lw := Guard[*corev1.ConfigMap](srv, g)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := lw.List(ctx, metav1.ListOptions{})
			errc <- err
		}()
		synctest.Wait()
		if g.Open() {
			t.Fatal("List's 404 did not shut the gate")
		}
		select {
		case err := <-errc:
			t.Fatalf("List returned %v before its context ended", err)
		default:
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("List = %v, want the context's error", err)
		}
		// Other errors pass through.
		srv.set(true)
		if _, err := lw.List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Errorf("List of a served kind = %v", err)
		}
	})
}
