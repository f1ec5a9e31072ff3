package manager_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/testenv"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func localListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startManager runs m.Start in the background. stop cancels its context,
// wait does not; both wait for Start and return its error.
func startManager(t *testing.T, m *manager.Manager) (stop, wait func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	var err error
	wait = func() error {
		once.Do(func() {
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("manager did not stop within 60s")
			}
		})
		return err
	}
	stop = func() error {
		cancel()
		return wait()
	}
	t.Cleanup(func() { _ = stop() })
	return stop, wait
}

// gatedCache is a Cache that syncs when its gate is closed.
type gatedCache struct{ gate chan struct{} }

func (g gatedCache) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (g gatedCache) WaitForSync(ctx context.Context) error {
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestManager_ServesMetricsAndReportsReadyOnlyAfterCachesSync(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "manager-probes")

	reg := prometheus.NewRegistry()
	f := informer.NewFactory(e.Config, informer.FactoryOptions{Registerer: reg, Logger: quiet()})
	cms, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	reconciled := make(chan cache.Key, 10)
	c, err := controller.New(controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		reconciled <- k
		return controller.Result{}, nil
	}), controller.Options[cache.Key]{Name: "probe-test", Registerer: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(controller.For(cms, controller.Filter(func(cm *corev1.ConfigMap) bool { return cm.Name == "x" }))); err != nil {
		t.Fatal(err)
	}

	lis := localListener(t)
	m, err := manager.New(manager.Options{MetricsListener: lis, HealthListener: lis, Gatherer: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	for _, r := range []manager.Runnable{f, c, gatedCache{gate}} {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	stop, _ := startManager(t, m)
	<-m.AddrReady()
	base := "http://" + m.Status().MetricsAddr.String()
	if m.Status().MetricsAddr.String() != lis.Addr().String() {
		t.Errorf("Addr = %v, want the listener's %v", m.Status().MetricsAddr, lis.Addr())
	}

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	// The gated cache has not synced: not ready, and saying why.
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]caches failed") {
		t.Errorf("/readyz before sync = %d %q, want 503 naming caches", code, body)
	}
	close(gate)
	testwait.Closed(t, "the manager's caches to sync", m.Synced())
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz after the caches synced = %d %q, want 200 ok", code, body)
	}

	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconciled:
	case <-time.After(30 * time.Second):
		t.Fatal("ConfigMap x not reconciled within 30s")
	}
	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		`controller_runtime_reconcile_total{controller="probe-test",result="success"} 1`,
		`controller_runtime_reconcile_errors_total{controller="probe-test"} 0`,
		`controller_runtime_reconcile_time_seconds_count{controller="probe-test"} 1`,
		`controller_runtime_max_concurrent_reconciles{controller="probe-test"} 1`,
		`controller_runtime_active_workers{controller="probe-test"}`,
		`workqueue_adds_total{controller="probe-test",name="probe-test"}`,
		`workqueue_depth{controller="probe-test",name="probe-test"`,
		`workqueue_queue_duration_seconds_bucket{controller="probe-test",name="probe-test"`,
		`workqueue_work_duration_seconds_bucket{controller="probe-test",name="probe-test"`,
		`workqueue_retries_total{controller="probe-test",name="probe-test"}`,
		`workqueue_unfinished_work_seconds{controller="probe-test",name="probe-test"}`,
		`workqueue_longest_running_processor_seconds{controller="probe-test",name="probe-test"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Start returned %v after a clean stop", err)
	}
}

// fakeElector leads when told to, and records whether lead returned
// before Run did.
type fakeElector struct {
	lead      chan struct{} // closed: become leader
	lose      chan struct{} // closed: lose leadership
	released  chan struct{} // closed once lead returned
	onRelease func()        // if set, called when lead has returned
}

var _ manager.Elector = (*leaderelection.Elector)(nil)

func (e *fakeElector) Run(ctx context.Context, lead func(context.Context) error) error {
	select {
	case <-e.lead:
	case <-ctx.Done():
		return nil
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.lose:
			cancel()
		case <-lctx.Done():
		}
	}()
	_ = lead(lctx)
	if e.onRelease != nil {
		e.onRelease()
	}
	close(e.released)
	return nil
}

// probe is a leader-needing runnable that reports its start and stop. With
// drain set, it stops only once drain is closed: a slow drain, which the
// lease must outlast; draining is then closed when the drain begins.
type probe struct {
	started, stopped chan struct{}
	drain, draining  chan struct{}
}

func (p *probe) Start(ctx context.Context) error {
	close(p.started)
	<-ctx.Done()
	if p.drain != nil {
		close(p.draining)
		<-p.drain
	}
	close(p.stopped)
	return nil
}

func TestManager_RunsLeaderRunnablesOnlyWhileLeadingAndReleasesAfterTheyReturn(t *testing.T) {
	el := &fakeElector{lead: make(chan struct{}), lose: make(chan struct{}), released: make(chan struct{})}
	lis := localListener(t)
	m, _ := manager.New(manager.Options{MetricsListener: lis, HealthListener: lis, LeaderElection: el, Logger: quiet(), Gatherer: prometheus.NewRegistry()})
	p := &probe{started: make(chan struct{}), stopped: make(chan struct{}), drain: make(chan struct{}), draining: make(chan struct{})}
	releasedEarly := false
	el.onRelease = func() {
		select {
		case <-p.stopped:
		default:
			releasedEarly = true
		}
	}
	everywhere := &probe{started: make(chan struct{}), stopped: make(chan struct{})}
	_ = m.Add(p)
	_ = m.Add(nonLeader{everywhere})
	_, wait := startManager(t, m)
	<-m.AddrReady()
	base := "http://" + m.Status().MetricsAddr.String()

	select {
	case <-everywhere.started:
	case <-time.After(10 * time.Second):
		t.Fatal("a runnable that needs no leadership did not start")
	}
	select {
	case <-p.started:
		t.Fatal("leader-needing runnable started before leading")
	default:
	}
	// A standby replica with synced (no) caches is ready (once the
	// manager has noted that they synced).
	testwait.Closed(t, "the manager's caches to sync", m.Synced())
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz on a standby = %d %q, want 200", code, body)
	}
	close(el.lead)
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("leader-needing runnable did not start after leading")
	}
	if !m.Status().Leading {
		t.Error("Status().Leading = false while leading")
	}
	close(el.lose)
	testwait.Closed(t, "the leader runnable to begin its drain", p.draining)
	select {
	case <-el.released:
		t.Error("lead returned (the lease releasable) while a leader runnable was still draining")
	default:
	}
	close(p.drain)
	err := wait() // losing the lease alone stops the manager
	if releasedEarly {
		t.Error("lead returned before the leader runnable had stopped")
	}
	if !errors.Is(err, manager.ErrLeadershipLost) {
		t.Errorf("Start = %v, want ErrLeadershipLost", err)
	}
	select {
	case <-p.stopped:
	default:
		t.Error("Start returned before the leader runnable stopped")
	}
	select {
	case <-el.released:
	default:
		t.Error("lead had not returned (lease not releasable) when Start returned")
	}
}

type nonLeader struct{ *probe }

func (nonLeader) NeedLeaderElection() bool { return false }

func TestManager_StopsEverythingAndReturnsTheErrorOfAFailedRunnable(t *testing.T) {
	boom := errors.New("boom")
	m, _ := manager.New(manager.Options{Logger: quiet()})
	other := &probe{started: make(chan struct{}), stopped: make(chan struct{})}
	_ = m.Add(other)
	_ = m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-other.started
		return boom
	}))
	err := m.Start(context.Background())
	if !errors.Is(err, boom) {
		t.Errorf("Start = %v, want it to wrap the runnable's error", err)
	}
	select {
	case <-other.stopped:
	default:
		t.Error("the other runnable had not stopped when Start returned")
	}
	if err := m.Start(context.Background()); !errors.Is(err, manager.ErrAlreadyStarted) {
		t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
	}
}

func TestManager_ShutdownTimeoutBoundsTheStop(t *testing.T) {
	m, _ := manager.New(manager.Options{Logger: quiet(), ShutdownTimeout: 100 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	_ = m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-release // ignores ctx
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Start(ctx); !errors.Is(err, manager.ErrShutdownTimeout) {
		t.Errorf("Start = %v, want ErrShutdownTimeout", err)
	}
}

func TestManager_MetricsAndHealthOnSeparateAddresses(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "kloop_test_total", Help: "test"}))
	metricsLis, healthLis := localListener(t), localListener(t)
	m, err := manager.New(manager.Options{MetricsListener: metricsLis, HealthListener: healthLis, Gatherer: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := startManager(t, m)
	<-m.AddrReady()
	metricsURL, healthURL := "http://"+m.Status().MetricsAddr.String(), "http://"+m.Status().HealthAddr.String()
	if metricsURL == healthURL {
		t.Fatalf("metrics and health share %s, want two servers", metricsURL)
	}
	if code, body := get(t, metricsURL+"/metrics"); code != 200 || !strings.Contains(body, "kloop_test_total") {
		t.Errorf("GET /metrics on the metrics address = %d %q, want 200 with the registry's metrics", code, body)
	}
	if code, _ := get(t, metricsURL+"/healthz"); code != http.StatusNotFound {
		t.Errorf("GET /healthz on the metrics address = %d, want 404", code)
	}
	if code, _ := get(t, healthURL+"/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the health address = %d, want 404", code)
	}
	if code, body := get(t, healthURL+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz on the health address = %d %q, want 200 ok", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestManager_ListensOnNothingUnlessAsked(t *testing.T) {
	for _, addr := range []string{"", "0"} {
		m, err := manager.New(manager.Options{MetricsAddr: addr, HealthAddr: addr, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		stop, _ := startManager(t, m)
		<-m.AddrReady()
		if a, h := m.Status().MetricsAddr, m.Status().HealthAddr; a != nil || h != nil {
			t.Errorf("addresses %q: MetricsAddr = %v, HealthAddr = %v, want both nil", addr, a, h)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestManager_StartFailsAtOnceWhenAPortIsTaken(t *testing.T) {
	taken := localListener(t)
	defer taken.Close()
	m, err := manager.New(manager.Options{MetricsAddr: "127.0.0.1:0", HealthAddr: taken.Addr().String(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), "health") {
		t.Fatalf("Start = %v, want an error naming the taken address and the health endpoint", err)
	}
}
