package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// overlapWatch counts reconciles running across every manager of the test
// and remembers whether two ever ran at once, and who reconciled when.
type overlapWatch struct {
	overlaps  atomic.Int32
	changed   await.Signal // after every reconcile start
	mu        sync.Mutex
	activeBy  map[string]int       // reconciles running per replica
	startedBy map[string]int       // reconciles begun per replica
	firstBy   map[string]time.Time // first reconcile of each replica
	lastBy    map[string]time.Time // end of the last reconcile of each replica
}

// reconciler's reconciles stay in progress until the replica is stopped
// (stopping is closed), so that the stop always lands mid-reconcile.
func (o *overlapWatch) reconciler(replica string, stopping <-chan struct{}) controller.Reconciler[cache.Key] {
	return controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		o.mu.Lock()
		for other, n := range o.activeBy {
			if other != replica && n > 0 {
				o.overlaps.Add(1)
			}
		}
		o.activeBy[replica]++
		o.startedBy[replica]++
		if _, ok := o.firstBy[replica]; !ok {
			o.firstBy[replica] = time.Now()
		}
		o.mu.Unlock()
		o.changed.Notify()
		select { // work in progress
		case <-stopping:
		case <-ctx.Done():
		}
		o.mu.Lock()
		o.lastBy[replica] = time.Now()
		o.activeBy[replica]--
		o.mu.Unlock()
		// Keep reconciling, so that any overlap would show.
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
	})
}

func (o *overlapWatch) first(replica string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.firstBy[replica]
	return t, ok
}

func (o *overlapWatch) started(replica string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.startedBy[replica]
}

type replica struct {
	name    string
	m       *manager.Manager
	elector *leaderelection.Elector
	stop    context.CancelFunc
	done    chan error

	once sync.Once
	err  error
}

// wait waits for Start to return, once, and returns its error.
func (r *replica) wait(t *testing.T) error {
	t.Helper()
	r.once.Do(func() {
		select {
		case r.err = <-r.done:
		case <-time.After(60 * time.Second):
			r.err = fmt.Errorf("%s did not stop within 60s", r.name)
		}
	})
	return r.err
}

func TestLeaderElection_OneLeaderHandsOverOnStopAndReconcilesNeverOverlap(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "leader-e2e")
	for i := range 3 {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const (
		leaseDuration = 4 * time.Second
		renewDeadline = 3 * time.Second
		retryPeriod   = 500 * time.Millisecond
	)
	watch := &overlapWatch{activeBy: map[string]int{}, startedBy: map[string]int{}, firstBy: map[string]time.Time{}, lastBy: map[string]time.Time{}}
	var replicas []*replica
	for _, name := range []string{"replica-a", "replica-b"} {
		// A client of its own, authenticated as its own user.
		cfg, err := e.UserConfig(name, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		f := informer.NewFactory(cfg, informer.FactoryOptions{Registerer: reg, Logger: quiet()})
		cms, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c, err := controller.New(watch.reconciler(name, ctx.Done()), controller.Options[cache.Key]{Name: "le-" + name, Workers: 2, Registerer: reg, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Watch(controller.For(cms)); err != nil {
			t.Fatal(err)
		}
		el, err := leaderelection.New(cfg, leaderelection.Options{
			Namespace: ns, Name: "le-test", Identity: name,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Registerer: reg, Logger: quiet(),
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := manager.New(manager.Options{LeaderElection: el, Gatherer: reg, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Add(f); err != nil {
			t.Fatal(err)
		}
		if err := m.Add(c); err != nil {
			t.Fatal(err)
		}
		r := &replica{name: name, m: m, elector: el, stop: cancel, done: make(chan error, 1)}
		go func() { r.done <- m.Start(ctx) }()
		replicas = append(replicas, r)
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.stop()
			if err := r.wait(t); err != nil {
				t.Errorf("%s: %v", r.name, err)
			}
		}
	})

	// Exactly one leads: wait for the first reconcile, then check who.
	var leader, standby *replica
	await.Until(t, "a first reconcile (somebody to lead)", watch.changed.Changed, func() bool {
		for _, r := range replicas {
			if _, ok := watch.first(r.name); ok {
				leader = r
			}
		}
		return leader != nil
	})
	for _, r := range replicas {
		if r != leader {
			standby = r
		}
	}
	// Let the leader hold the lease for two lease durations, renewing it,
	// while the standby keeps campaigning.
	lease := await.Object(t, "the leader to hold the lease for two lease durations", kc.CoordinationV1().Leases(ns), "le-test", func(l *coordinationv1.Lease) bool {
		return l.Spec.AcquireTime != nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Sub(l.Spec.AcquireTime.Time) >= 2*leaseDuration
	})
	if h := lease.Spec.HolderIdentity; h == nil || *h != leader.name {
		t.Fatalf("lease held by %v after two lease durations, want %s", h, leader.name)
	}
	if !leader.m.Status().Leading || standby.m.Status().Leading {
		t.Fatalf("Leading: %s=%v %s=%v, want only %s", leader.name, leader.m.Status().Leading, standby.name, standby.m.Status().Leading, leader.name)
	}
	if _, ok := watch.first(standby.name); ok {
		t.Fatalf("standby %s reconciled while %s led", standby.name, leader.name)
	}
	if got := leader.elector.Status().Leader; got != leader.name {
		t.Errorf("lease holder seen by the leader = %q, want %q", got, leader.name)
	}
	// The standby is ready: synced and campaigning.
	rec := httptest.NewRecorder()
	standby.m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("standby /readyz = %d %q, want 200", rec.Code, rec.Body)
	}

	// Stop the leader: it drains its reconciles, releases the lease, and
	// the standby takes over within LeaseDuration + RetryPeriod.
	stoppedAt := time.Now()
	leader.stop()
	if err := leader.wait(t); err != nil {
		t.Errorf("stopped leader's Start = %v, want nil", err)
	}
	bound := leaseDuration + retryPeriod
	// Both of the new leader's workers busy: every reconcile it began
	// was checked against the old leader's.
	await.Until(t, standby.name+" to take over", watch.changed.Changed, func() bool { return watch.started(standby.name) >= 2 })
	at, _ := watch.first(standby.name)
	if d := at.Sub(stoppedAt); d > bound {
		t.Errorf("hand-over took %v, want at most lease duration + retry period = %v", d, bound)
	} else {
		t.Logf("hand-over: %s reconciled %v after %s was stopped", standby.name, d.Round(time.Millisecond), leader.name)
	}
	if !standby.m.Status().Leading {
		t.Error("new leader's Status().Leading = false")
	}
	if n := watch.overlaps.Load(); n != 0 {
		t.Errorf("reconciles of two replicas ran at the same time %d times", n)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if last, first := watch.lastBy[leader.name], watch.firstBy[standby.name]; !last.Before(first) {
		t.Errorf("old leader's last reconcile ended at %v, after the new leader's first began at %v", last, first)
	}
}
