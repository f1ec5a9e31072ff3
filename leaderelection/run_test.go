package leaderelection

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kloop-dev/kloop/internal/lease"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// memLeases keeps one lease in memory with the API server's optimistic
// concurrency (resourceVersion preconditions). It is for the timing tests of
// Run under testing/synctest; the election itself is tested against a real
// API server in elector_test.go.
type memLeases struct {
	mu      sync.Mutex
	lease   *coordinationv1.Lease
	rv      int
	fail    error                          // every call fails with it when set
	onWrite func(coordinationv1.LeaseSpec) // called with each stored spec
	// beforeUpdate, when set, is called with each update before it is
	// applied, without the lock: it may write the lease itself.
	beforeUpdate func(*coordinationv1.Lease)
}

var leaseGR = coordinationv1.Resource("leases")

func (m *memLeases) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *memLeases) holder() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return "<none>"
	}
	return ptr.Deref(m.lease.Spec.HolderIdentity, "")
}

func (m *memLeases) Get(_ context.Context, _, name string) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	if m.lease == nil {
		return nil, apierrors.NewNotFound(leaseGR, name)
	}
	return m.lease.DeepCopy(), nil
}

func (m *memLeases) Create(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	if m.lease != nil {
		return nil, apierrors.NewAlreadyExists(leaseGR, l.Name)
	}
	return m.storeLocked(l), nil
}

func (m *memLeases) Update(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if m.beforeUpdate != nil {
		m.beforeUpdate(l)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	if m.lease == nil {
		return nil, apierrors.NewNotFound(leaseGR, l.Name)
	}
	if l.ResourceVersion != m.lease.ResourceVersion {
		return nil, apierrors.NewConflict(leaseGR, l.Name, errors.New("resourceVersion changed"))
	}
	return m.storeLocked(l), nil
}

func (m *memLeases) storeLocked(l *coordinationv1.Lease) *coordinationv1.Lease {
	m.rv++
	m.lease = l.DeepCopy()
	m.lease.ResourceVersion = strconv.Itoa(m.rv)
	if m.onWrite != nil {
		m.onWrite(m.lease.Spec)
	}
	return m.lease.DeepCopy()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are an elector's Options and the leader's work its Run
// gets.
type testOptions struct {
	Options
	work func(context.Context) error
}

func testConfig(id string, work func(context.Context) error) testOptions {
	return testOptions{Options: Options{
		Namespace: "ns", Name: "lock", Identity: id,
		Logger:     quiet(),
		Registerer: prometheus.NewRegistry(),
	}, work: work}
}

// testElector is an Elector whose Run runs the work of its testOptions.
type testElector struct {
	*Elector
	work func(context.Context) error
}

func (e testElector) Run(ctx context.Context) error { return e.Elector.Run(ctx, e.work) }

func newTestElector(leases lease.Client, o testOptions) (testElector, error) {
	e, err := newElector(leases, o.Options)
	return testElector{e, o.work}, err
}

func TestRun_LeaderWhoseRenewalsFailStopsWithinRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memLeases{}
		started := make(chan struct{})
		cause := make(chan error, 1)
		var stopped atomic.Bool
		cfg := testConfig("a", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil
		})
		cfg.OnStoppedLeading = func() { stopped.Store(true) }
		e, err := newTestElector(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- e.Run(t.Context()) }()
		<-started
		// Let a few renewals succeed, then cut the API server off.
		time.Sleep(5 * time.Second)
		if !e.Status().Leading || m.holder() != "a" {
			t.Fatalf("Leading %v, holder %q after 5s: want a leading", e.Status().Leading, m.holder())
		}
		m.setFail(errors.New("connection refused"))
		failedAt := time.Now()

		err = <-errc
		took := time.Since(failedAt)
		if !errors.Is(err, ErrLeadershipLost) {
			t.Fatalf("Run = %v, want ErrLeadershipLost", err)
		}
		if c := <-cause; !errors.Is(c, ErrLeadershipLost) {
			t.Fatalf("the work's context cause is %v, want ErrLeadershipLost", c)
		}
		// The last renewal started at most one RetryPeriod before the
		// failure, and leadership ends RenewDeadline after that start.
		if took > DefaultRenewDeadline || took < DefaultRenewDeadline-DefaultRetryPeriod {
			t.Fatalf("stopped leading %v after the server went away, want within (%v, %v]",
				took, DefaultRenewDeadline-DefaultRetryPeriod, DefaultRenewDeadline)
		}
		if e.Status().Leading || !stopped.Load() {
			t.Fatalf("after losing: Leading %v, OnStoppedLeading called %v", e.Status().Leading, stopped.Load())
		}
	})
}

func TestRun_KeepsRenewingUntilWorkReturnsAndReleasesOnlyAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var returned atomic.Bool
		var releasedEarly, renewedWhileStopping atomic.Bool
		var cancelledAt atomic.Pointer[time.Time]
		m := &memLeases{}
		m.onWrite = func(s coordinationv1.LeaseSpec) {
			switch h := ptr.Deref(s.HolderIdentity, ""); {
			case h == "" && !returned.Load():
				releasedEarly.Store(true)
			case h == "a" && cancelledAt.Load() != nil && !returned.Load():
				renewedWhileStopping.Store(true)
			}
		}
		started, finish := make(chan struct{}), make(chan struct{})
		cfg := testConfig("a", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			<-finish // a slow shutdown of the leader's work
			returned.Store(true)
			return ctx.Err()
		})
		var holderAtStop string
		cfg.OnStoppedLeading = func() { holderAtStop = m.holder() }
		e, err := newTestElector(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- e.Run(ctx) }()
		<-started
		now := time.Now()
		cancelledAt.Store(&now)
		cancel()
		// The work takes 3 lease durations to stop; the lease must stay ours.
		time.Sleep(3 * DefaultLeaseDuration)
		if h := m.holder(); h != "a" {
			t.Fatalf("holder %q while the work is still stopping, want a", h)
		}
		close(finish)
		if err := <-errc; err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
		if releasedEarly.Load() {
			t.Fatal("lease released before the leader's work returned")
		}
		if !renewedWhileStopping.Load() {
			t.Fatal("lease not renewed while the work was stopping")
		}
		if holderAtStop != "" {
			t.Fatalf("holder %q when OnStoppedLeading ran, want released", holderAtStop)
		}
	})
}

func TestRun_WorkReturningEndsLeadershipWithItsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memLeases{}
		boom := errors.New("boom")
		e, err := newTestElector(m, testConfig("a", func(context.Context) error { return boom }))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Run(t.Context()); !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want the work's error", err)
		}
		if h := m.holder(); h != "" {
			t.Fatalf("holder %q after the work returned, want released", h)
		}
	})
}

func TestRun_CandidateThatNeverLedGetsNoStartOrStopCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memLeases{}
		// b holds the lease and keeps renewing it.
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock"}}
		setRecord(l, record{Holder: "b", LeaseDuration: DefaultLeaseDuration})
		if _, err := m.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		var leaders []string
		var startedOrStopped atomic.Bool
		cfg := testConfig("a", func(context.Context) error { startedOrStopped.Store(true); return nil })
		cfg.OnStoppedLeading = func() { startedOrStopped.Store(true) }
		cfg.OnNewLeader = func(id string) { leaders = append(leaders, id) }
		e, err := newTestElector(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*DefaultLeaseDuration)
		defer cancel()
		renewer := make(chan struct{})
		go func() {
			defer close(renewer)
			for ctx.Err() == nil {
				time.Sleep(DefaultRetryPeriod)
				cur, _ := m.Get(ctx, "ns", "lock")
				setRecord(cur, record{Holder: "b", LeaseDuration: DefaultLeaseDuration, RenewTime: time.Now()})
				_, _ = m.Update(ctx, cur)
			}
		}()
		if err := e.Run(ctx); err != nil {
			t.Fatalf("Run = %v, want nil when ctx ends before leading", err)
		}
		<-renewer
		if startedOrStopped.Load() {
			t.Fatal("the leader's work or OnStoppedLeading called for a candidate that never led")
		}
		if len(leaders) != 1 || leaders[0] != "b" || e.Status().Leader != "b" {
			t.Fatalf("OnNewLeader calls %v, Status().Leader %q: want [b] and b", leaders, e.Status().Leader)
		}
	})
}

func TestRun_TakesOverALeaseThatStoppedBeingRenewedAfterLeaseDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memLeases{}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock"}}
		setRecord(l, record{Holder: "crashed", LeaseDuration: DefaultLeaseDuration, Transitions: 1})
		if _, err := m.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		var ledAfter time.Duration
		e, err := newTestElector(m, testConfig("a", func(context.Context) error {
			ledAfter = time.Since(began)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Expiry counts from our first sight of the lease (at 0), and the
		// attempt comes at the expiry itself, not at a later periodic one.
		if ledAfter != DefaultLeaseDuration {
			t.Fatalf("took over after %v, want exactly LeaseDuration %v after the first sight", ledAfter, DefaultLeaseDuration)
		}
		cur, _ := m.Get(t.Context(), "ns", "lock")
		if got := ptr.Deref(cur.Spec.LeaseTransitions, 0); got != 2 {
			t.Fatalf("leaseTransitions %d after a takeover from 1, want 2", got)
		}
	})
}

func TestRun_SecondConcurrentRunIsRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		e, err := newTestElector(&memLeases{}, testConfig("a", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- e.Run(ctx) }()
		<-started
		if err := e.Run(ctx); !errors.Is(err, ErrAlreadyRunning) {
			t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

// TestRun_StandbyTakesOverWithinLeaseDurationPlusRetryPeriodOfTheLastRenewal
// runs a standby against a holder that renews every RetryPeriod and stops
// (as if killed) at a range of moments against the standby's schedule.
// Requests take no time here, so the bound is exact: the standby leads no
// sooner than LeaseDuration and no later than LeaseDuration + RetryPeriod
// after the holder's last renewal.
func TestRun_StandbyTakesOverWithinLeaseDurationPlusRetryPeriodOfTheLastRenewal(t *testing.T) {
	const (
		lease = 4 * time.Second
		renew = 3 * time.Second
		retry = 500 * time.Millisecond
	)
	var worst time.Duration
	for offset := time.Duration(0); offset < retry; offset += 50 * time.Millisecond {
		synctest.Test(t, func(t *testing.T) {
			m := &memLeases{}
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock"}}
			setRecord(l, record{Holder: "b", LeaseDuration: lease})
			if _, err := m.Create(t.Context(), l); err != nil {
				t.Fatal(err)
			}
			// b renews every RetryPeriod, starting offset into the
			// standby's first period, for three lease durations.
			lastRenewal := make(chan time.Time, 1)
			go func() {
				time.Sleep(offset)
				var last time.Time
				for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(retry) {
					cur, _ := m.Get(t.Context(), "ns", "lock")
					setRecord(cur, record{Holder: "b", LeaseDuration: lease, RenewTime: time.Now()})
					if _, err := m.Update(t.Context(), cur); err != nil {
						t.Errorf("b's renewal: %v", err)
					}
					last = time.Now()
				}
				lastRenewal <- last
			}()
			var ledAt time.Time
			cfg := testConfig("a", func(context.Context) error { ledAt = time.Now(); return nil })
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = lease, renew, retry
			e, err := newTestElector(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			took := ledAt.Sub(<-lastRenewal)
			if took < lease || took > lease+retry {
				t.Fatalf("b's renewals started %v into a's period: a led %v after b's last renewal, want within [%v, %v]",
					offset, took, lease, lease+retry)
			}
			worst = max(worst, took)
		})
	}
	t.Logf("worst takeover %v after the last renewal (lease %v, retry period %v)", worst, lease, retry)
}

// TestRun_StandbyWhoseWriteAtExpiryConflictsReadsAndWaitsAgain checks the
// write a standby makes at expiry without reading first: when the holder
// renewed just before it landed, the precondition fails, and the standby
// reads the renewal and waits a new LeaseDuration instead of leading.
func TestRun_StandbyWhoseWriteAtExpiryConflictsReadsAndWaitsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 4 * time.Second
		m := &memLeases{}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock"}}
		setRecord(l, record{Holder: "b", LeaseDuration: lease})
		if _, err := m.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		var renewedAt []time.Duration
		// b renews once, just ahead of a's first write.
		m.beforeUpdate = func(l *coordinationv1.Lease) {
			if ptr.Deref(l.Spec.HolderIdentity, "") != "a" || len(renewedAt) > 0 {
				return
			}
			renewedAt = append(renewedAt, time.Since(began))
			cur, _ := m.Get(t.Context(), "ns", "lock")
			setRecord(cur, record{Holder: "b", LeaseDuration: lease, RenewTime: time.Now()})
			if _, err := m.Update(t.Context(), cur); err != nil {
				t.Errorf("b's renewal: %v", err)
			}
		}
		var ledAfter time.Duration
		cfg := testConfig("a", func(context.Context) error { ledAfter = time.Since(began); return nil })
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = lease, 3*time.Second, 500*time.Millisecond
		e, err := newTestElector(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(renewedAt) != 1 || renewedAt[0] != lease {
			t.Fatalf("b renewed at %v, want once, at %v when a's first write came (the test's premise)", renewedAt, lease)
		}
		if ledAfter != 2*lease {
			t.Fatalf("a led %v after it first saw the lease, want %v: LeaseDuration after it saw b's renewal at %v", ledAfter, 2*lease, lease)
		}
	})
}

func TestRun_WithoutTheLeadersWorkIsRefused(t *testing.T) {
	e, err := newElector(&memLeases{}, testConfig("a", nil).Options)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "give lead") {
		t.Errorf("Run(ctx, nil) = %v, want an error asking for lead", err)
	}
}
