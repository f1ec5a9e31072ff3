package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	"github.com/kloop-dev/kloop/testenv/await"
)

// The lease timing of the partitioned-leader test and the bounds that
// follow from it. A leader stops leading RenewDeadline after the start of
// its last successful renewal; a candidate takes over no sooner than
// LeaseDuration after it saw that renewal. Reconciles are drained within
// DrainTimeout, which is less than the difference, so no two replicas
// reconcile at once, with LeaseDuration − RenewDeadline − DrainTimeout to
// spare for clock-rate drift between machines (here one machine, one clock).
// The standby takes over within LeaseDuration + RetryPeriod of that last
// renewal; the takeover bound adds a second for its API calls and the first
// reconcile on a busy machine.
const (
	leaseDuration   = 6 * time.Second
	renewDeadline   = 4 * time.Second
	retryPeriod     = 500 * time.Millisecond
	leaderDrain     = time.Second
	skewAllowance   = 0 // one clock: any overlap at all is a failure
	takeoverBound   = leaseDuration + retryPeriod + time.Second
	reconcileLength = 100 * time.Millisecond
)

// span is one reconcile: who ran it, from when to when.
type span struct {
	replica    string
	start, end time.Time
}

// timeline records every reconcile of every replica, and lets the test wait
// for a replica's first one without polling.
type timeline struct {
	mu      sync.Mutex
	spans   []span
	changed chan struct{}
}

func (tl *timeline) reconciler(replica string) controller.Reconciler[cache.Key] {
	return controller.ReconcilerFunc[cache.Key](func(ctx context.Context, _ cache.Key) (controller.Result, error) {
		s := span{replica: replica, start: time.Now()}
		select { // the work of a reconcile, cut short when told to stop
		case <-time.After(reconcileLength):
		case <-ctx.Done():
		}
		s.end = time.Now()
		tl.mu.Lock()
		tl.spans = append(tl.spans, s)
		close(tl.changed)
		tl.changed = make(chan struct{})
		tl.mu.Unlock()
		// Keep reconciling, so that any overlap would show.
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
	})
}

// waitFor waits until some span satisfies ok, and returns it.
func (tl *timeline) waitFor(ctx context.Context, ok func(span) bool) (span, error) {
	for {
		tl.mu.Lock()
		for _, s := range tl.spans {
			if ok(s) {
				tl.mu.Unlock()
				return s, nil
			}
		}
		ch := tl.changed
		tl.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return span{}, context.Cause(ctx)
		}
	}
}

func (tl *timeline) all() []span {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.spans)
}

type leaderReplica struct {
	name  string
	proxy *testenv.Proxy
	m     *manager.Manager
	logs  *await.Buffer
	done  chan error
	stop  context.CancelFunc
	// exited: done has been received from.
	exited bool
}

// A leader whose path to the API server is blackholed stops reconciling
// before its lease can be taken over; the other replica takes over; no two
// replicas ever reconcile at the same time; and the partitioned replica's
// manager returns ErrLeadershipLost with a clear log line.
func TestFault_PartitionedLeader_StopsBeforeTheTakeoverAndExits(t *testing.T) {
	e := controlPlane.Env(t)
	admin := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, admin, "partition")
	setup := deadline(t, 30*time.Second, "setup")
	for i := range 3 {
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(setup, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tl := &timeline{changed: make(chan struct{})}
	var replicas []*leaderReplica
	for _, name := range []string{"replica-a", "replica-b"} {
		r := &leaderReplica{name: name, proxy: e.APIServerProxy(t), logs: &await.Buffer{}, done: make(chan error, 1)}
		user, err := e.UserConfig("partition-"+name, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		cfg := r.proxy.RESTConfig(user)
		log := slog.New(slog.NewTextHandler(r.logs, nil)).With("replica", name)
		reg := prometheus.NewRegistry()
		f := informer.NewFactory(cfg, informer.FactoryOptions{Registerer: reg, Logger: log})
		cms, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		c, err := controller.New(tl.reconciler(name), controller.Options[cache.Key]{
			Name: "partition", Workers: 2, DrainTimeout: leaderDrain, Registerer: reg, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Watch(controller.For[*corev1.ConfigMap](cms)); err != nil {
			t.Fatal(err)
		}
		el, err := leaderelection.New(cfg, leaderelection.Options{
			Namespace: ns, Name: "partition", Identity: name,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Registerer: reg, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.m, err = manager.New(manager.Options{LeaderElection: el, Gatherer: reg, Logger: log}); err != nil {
			t.Fatal(err)
		}
		if err := r.m.Add(f); err != nil {
			t.Fatal(err)
		}
		if err := r.m.Add(c); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.stop = cancel
		go func() { r.done <- r.m.Start(ctx) }()
		replicas = append(replicas, r)
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.stop()
			if !r.exited {
				select {
				case <-r.done:
				case <-time.After(60 * time.Second):
					t.Errorf("%s did not stop within 60s", r.name)
				}
			}
			if t.Failed() {
				t.Logf("logs of %s:\n%s", r.name, r.logs)
			}
		}
	})

	// One of them leads and reconciles.
	first, err := tl.waitFor(deadline(t, 30*time.Second, "a first leader"), func(span) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	leader, standby := replicas[0], replicas[1]
	if first.replica != leader.name {
		leader, standby = standby, leader
	}
	t.Logf("%s leads", leader.name)

	// Partition the leader.
	leader.proxy.Set(testenv.Fault{Blackhole: true})
	partitioned := time.Now()

	// It gives up leadership and its manager exits with ErrLeadershipLost.
	var lostErr error
	select {
	case lostErr = <-leader.done:
	case <-time.After(renewDeadline + leaderDrain + 30*time.Second):
		t.Fatalf("partitioned leader %s still running %v after the partition", leader.name, renewDeadline+leaderDrain+30*time.Second)
	}
	exited := time.Since(partitioned)
	t.Logf("%s exited %v after the partition: %v", leader.name, exited.Round(time.Millisecond), lostErr)
	leader.exited = true
	if !errors.Is(lostErr, manager.ErrLeadershipLost) {
		t.Errorf("partitioned leader's Start = %v, want ErrLeadershipLost", lostErr)
	}
	if logs := leader.logs.String(); !strings.Contains(logs, "leadership lost: stopping the leader's work") {
		t.Errorf("partitioned leader logged no line saying leadership was lost:\n%s", logs)
	}

	// The standby takes over within LeaseDuration + RetryPeriod of the
	// leader's last renewal, which came before the partition.
	took, err := tl.waitFor(deadline(t, takeoverBound+10*time.Second, "the takeover"), func(s span) bool { return s.replica == standby.name })
	if err != nil {
		t.Fatal(err)
	}
	if d := took.start.Sub(partitioned); d > takeoverBound {
		t.Errorf("%s took over %v after the partition, want within %v", standby.name, d, takeoverBound)
	} else {
		t.Logf("%s took over %v after the partition (bound %v)", standby.name, d.Round(time.Millisecond), takeoverBound)
	}

	// No two replicas reconciled at overlapping times.
	spans := tl.all()
	var lastOld time.Time
	for _, s := range spans {
		if s.replica == leader.name && s.end.After(lastOld) {
			lastOld = s.end
		}
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.replica == b.replica {
				continue
			}
			if overlap := earlier(a.end, b.end).Sub(later(a.start, b.start)); overlap > skewAllowance {
				t.Errorf("%s reconciled %v–%v and %s %v–%v: overlapping by %v", a.replica, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli),
					b.replica, b.start.Format(time.StampMilli), b.end.Format(time.StampMilli), overlap)
			}
		}
	}
	t.Logf("%d reconciles; gap between the old leader's last and the new leader's first: %v", len(spans), took.start.Sub(lastOld).Round(time.Millisecond))
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
