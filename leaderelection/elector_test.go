package leaderelection_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// Short timings so that the tests take seconds; the lease stores whole
// seconds.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// slack absorbs scheduling and request latency on a busy machine.
	slack = time.Second
)

// started is one call of the leader's work.
type started struct {
	id string
	at time.Time
}

// candidates runs electors for one lease and checks that no two of them
// ever run the leader's work at the same time.
type candidates struct {
	t        *testing.T
	leading  chan started
	active   atomic.Int32
	most     atomic.Int32
	observed await.Signal // a candidate observed a new lease holder
}

func newCandidates(t *testing.T) *candidates {
	return &candidates{t: t, leading: make(chan started, 4)}
}

// work is the leader's work for candidate id: it counts itself active
// until its context ends.
func (c *candidates) work(id string) func(context.Context) error {
	return func(ctx context.Context) error {
		n := c.active.Add(1)
		for {
			m := c.most.Load()
			if n <= m || c.most.CompareAndSwap(m, n) {
				break
			}
		}
		c.leading <- started{id, time.Now()}
		<-ctx.Done()
		c.active.Add(-1)
		return nil
	}
}

// elector is a running candidate.
type elector struct {
	*leaderelection.Elector
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned, with err set
	err    error
}

// start creates a candidate with its own user and client and runs it until
// the test ends (or cancel).
func (c *candidates) start(env *testenv.Env, lease, id string, mutate func(*leaderelection.Options, *func(context.Context) error)) *elector {
	t := c.t
	cfg, err := env.UserConfig("candidate-"+id, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	lc := leaderelection.Options{
		Namespace: "default", Name: lease, Identity: id,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		OnNewLeader: func(string) { c.observed.Notify() },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer:  prometheus.NewRegistry(),
	}
	work := c.work(id)
	if mutate != nil {
		mutate(&lc, &work)
	}
	e, err := leaderelection.New(cfg, lc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	el := &elector{Elector: e, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(el.done)
		el.err = e.Run(ctx, work)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-el.done:
		case <-time.After(30 * time.Second):
			t.Errorf("Run of %s did not return within 30s of cancel", id)
		}
		if m := c.most.Load(); m > 1 {
			t.Errorf("%d candidates ran the leader's work at the same time", m)
		}
	})
	return el
}

func (c *candidates) nextLeader(what string) started {
	c.t.Helper()
	select {
	case s := <-c.leading:
		return s
	case <-time.After(30 * time.Second):
		c.t.Fatalf("no candidate started leading within 30s (%s)", what)
		panic("unreachable")
	}
}

func runReturns(t *testing.T, e *elector, what string) error {
	t.Helper()
	select {
	case <-e.done:
		return e.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return within 30s (%s)", what)
		panic("unreachable")
	}
}

func TestAgainstAPIServer(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	holder := func(ctx context.Context, lease string) (string, int32) {
		l, err := cs.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease %s: %v", lease, err)
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseTransitions, 0)
	}

	t.Run("OneOfTwoLeadsAndCancelHandsOverWithinARetryPeriodByReleasing", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c := newCandidates(t)
		els := map[string]*elector{
			"a": c.start(env, "handover", "a", nil),
			"b": c.start(env, "handover", "b", nil),
		}
		first := c.nextLeader("initial election")
		second := "a"
		if first.id == "a" {
			second = "b"
		}
		if !els[first.id].Status().Leading {
			t.Fatalf("%s runs the leader's work but IsLeader is false", first.id)
		}
		// The other candidate sees the leader and waits.
		await.Until(t, second+" to observe "+first.id+" leading", c.observed.Changed, func() bool { return els[second].Status().Leader == first.id })
		if els[second].Status().Leading {
			t.Fatalf("%s: Status().Leader = %q, Leading %v; want it to observe %s and not lead", second, els[second].Status().Leader, els[second].Status().Leading, first.id)
		}
		if h, _ := holder(ctx, "handover"); h != first.id {
			t.Fatalf("lease holder %q, want %s", h, first.id)
		}

		cancelledAt := time.Now()
		els[first.id].cancel()
		if err := runReturns(t, els[first.id], "leader cancelled"); err != nil {
			t.Fatalf("Run of the cancelled leader = %v, want nil", err)
		}
		next := c.nextLeader("handover after cancel")
		took := next.at.Sub(cancelledAt)
		if next.id != second {
			t.Fatalf("%s led again after being cancelled", next.id)
		}
		// Released on cancel: the other takes over at its next attempt, well
		// before the lease would have expired.
		if took > retryPeriod+slack || took >= leaseDuration {
			t.Fatalf("handover took %v, want at most RetryPeriod+slack = %v (and under LeaseDuration %v)", took, retryPeriod+slack, leaseDuration)
		}
		if h, transitions := holder(ctx, "handover"); h != second || transitions != 1 {
			t.Fatalf("lease holder %q with %d transitions, want %s with 1", h, transitions, second)
		}
		t.Logf("handover after cancel took %v", took)
	})

	t.Run("KeptLeaseIsTakenOverOnlyOnceItExpires", func(t *testing.T) {
		c := newCandidates(t)
		keep := func(cfg *leaderelection.Options, _ *func(context.Context) error) { cfg.KeepLeaseOnCancel = true }
		els := map[string]*elector{
			"a": c.start(env, "kept", "a", keep),
			"b": c.start(env, "kept", "b", keep),
		}
		first := c.nextLeader("initial election")
		cancelledAt := time.Now()
		els[first.id].cancel()
		if err := runReturns(t, els[first.id], "leader cancelled"); err != nil {
			t.Fatalf("Run of the cancelled leader = %v, want nil", err)
		}
		next := c.nextLeader("takeover after expiry")
		took := next.at.Sub(cancelledAt)
		// The last renewal was at most a RetryPeriod before the cancel; the
		// other candidate saw it at most a RetryPeriod later, and takes over
		// LeaseDuration after it saw it.
		lo, hi := leaseDuration-retryPeriod, leaseDuration+retryPeriod+slack
		if next.id == first.id || took < lo || took > hi {
			t.Fatalf("%s took over after %v, want the other candidate within [%v, %v]", next.id, took, lo, hi)
		}
		t.Logf("takeover of a kept lease took %v", took)
	})

	// Last: it stops the API server.
	t.Run("LeaderStopsWithinRenewDeadlineWhenAPIServerGoesAway", func(t *testing.T) {
		c := newCandidates(t)
		var stoppedAt atomic.Pointer[time.Time]
		el := c.start(env, "outage", "a", func(_ *leaderelection.Options, lead *func(context.Context) error) {
			work := *lead
			*lead = func(ctx context.Context) error {
				err := work(ctx)
				now := time.Now()
				stoppedAt.Store(&now)
				return err
			}
		})
		c.nextLeader("single candidate")
		// Let it renew first.
		leases := cs.CoordinationV1().Leases("default")
		first := await.Object(t, "the lease", leases, "outage", func(*coordinationv1.Lease) bool { return true }).ResourceVersion
		await.Object(t, "the leader to renew the lease", leases, "outage", func(l *coordinationv1.Lease) bool { return l.ResourceVersion != first })

		wentAway := time.Now()
		env.StopAPIServer()
		err = runReturns(t, el, "API server stopped")
		if !errors.Is(err, leaderelection.ErrLeadershipLost) {
			t.Fatalf("Run = %v, want ErrLeadershipLost", err)
		}
		took := stoppedAt.Load().Sub(wentAway)
		if took > renewDeadline+slack {
			t.Fatalf("the leader's work stopped %v after the API server went away, want at most RenewDeadline+slack = %v", took, renewDeadline+slack)
		}
		if el.Status().Leading {
			t.Fatal("IsLeader after losing leadership")
		}
		t.Logf("leader stopped %v after the API server went away", took)
	})
}
