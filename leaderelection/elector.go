package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/internal/lease"
)

// FieldManager is the field manager of the writes to Leases, by electors
// and by shard group members (both write through internal/lease).
const FieldManager = "kloop-leader-election"

// Elector competes for one Lease and runs the leader's work while it holds
// it. Create it with New and call Run. Status may be called from any
// goroutine.
type Elector struct {
	cfg          Options
	leases       lease.Client
	running      atomic.Bool
	leadingGauge prometheus.Gauge

	mu        sync.Mutex
	leading   bool
	leader    string
	renewedAt time.Time
	since     time.Time // when leading last became true
	renewals  uint64
}

// The rights an elector needs on its Lease, in the namespace it is elected
// in: controller-gen's RBAC generator turns these into a Role there
// ("system" is a placeholder that kustomize replaces with the deployable's
// namespace; see deploy/).
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=system

// New returns an elector for the lease cfg names, talking to the API server
// restCfg points at with a client of its own. It validates cfg (errors wrap
// ErrInvalidConfig), does no I/O and starts no goroutines.
func New(restCfg *rest.Config, cfg Options) (*Elector, error) {
	leases, err := lease.NewClient(restCfg, FieldManager, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("leaderelection: %w", err)
	}
	return newElector(leases, cfg)
}

func newElector(leases lease.Client, cfg Options) (*Elector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	vec, err := kmetrics.RegisterOrGet(cfg.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "1 while this process leads the election of the named lease, else 0.",
	}, []string{"name"}))
	if err != nil {
		return nil, fmt.Errorf("leaderelection: registering metrics: %w", err)
	}
	g := vec.WithLabelValues(cfg.Namespace + "/" + cfg.Name)
	g.Set(0)
	return &Elector{cfg: cfg, leases: leases, leadingGauge: g}, nil
}

// stalledLocked is Status.Stalled.
func (e *Elector) stalledLocked() error {
	if e.leading {
		if since := e.cfg.Clock.Since(e.renewedAt); since > e.cfg.LeaseDuration {
			return fmt.Errorf("leaderelection: leading lease %s/%s but last renewed %v ago, more than LeaseDuration %v",
				e.cfg.Namespace, e.cfg.Name, since.Round(time.Millisecond), e.cfg.LeaseDuration)
		}
	}
	return nil
}

// Run competes for the lease until this candidate leads, runs lead (the
// leader's work) from a goroutine it starts and waits for, renews the
// lease while lead runs, and returns once leadership has ended, lead has
// returned, the lease has been released (unless KeepLeaseOnCancel, or
// renewal failed) and OnStoppedLeading has been called.
//
// lead's context is cancelled, with a cause, when leadership ends: ctx was
// cancelled, or renewal failed for RenewDeadline (cause
// ErrLeadershipLost). It must then return promptly; the lease is renewed
// until it returns (unless renewal is what failed) and only released
// after. When lead returns by itself, leadership ends.
//
// Run returns nil when ctx ended (before or during leadership); an error
// wrapping ErrLeadershipLost when renewal failed for RenewDeadline; and
// otherwise what lead returned when it returned by itself. Run
// may be called again after it returned, to compete anew; ErrAlreadyRunning
// is returned while another Run of this Elector is in progress. Every
// goroutine it starts has exited when it returns.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	if lead == nil {
		return errors.New("leaderelection: Run needs the leader's work: give lead")
	}
	if !e.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer e.running.Store(false)
	r := &run{e: e, cfg: e.cfg, work: lead, core: newCore(e.cfg.Identity, e.cfg.timing()),
		lease: lease.NewHeld(e.leases, e.cfg.Namespace, e.cfg.Name)}
	r.log = e.cfg.Logger.With("lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.Identity)
	if !r.acquire(ctx) {
		return nil
	}
	return r.lead(ctx)
}

// run is the state of one Run, owned by its goroutine.
type run struct {
	e        *Elector
	work     func(ctx context.Context) error // the leader's work, Run's lead
	cfg      Options
	log      *slog.Logger
	core     *core
	lease    *lease.Held // the Lease as last read or written
	reported string      // holder last passed to OnNewLeader
	started  bool        // OnNewLeader has been called at least once

	// For the log of an acquisition: the holder before our last write, how
	// long that write took, and how long the read took that last showed the
	// lease change (its answer started the wait for expiry).
	previous   string
	wrote      time.Duration
	changeRead time.Duration
}

// acquire makes attempts until this candidate holds the lease, and reports
// whether it does. Attempts start RetryPeriod apart (less up to 20% at
// random, so that candidates spread out), or sooner when the lease held by
// another expires (see core.nextAttempt). It returns false when ctx ended;
// a lease acquired just as ctx ended is released again.
func (r *run) acquire(ctx context.Context) bool {
	clk := r.cfg.Clock
	r.log.Info("competing for leadership")
	for {
		start := clk.Now()
		actx, cancel := context.WithTimeout(ctx, r.cfg.RenewDeadline)
		ok, err := r.tryAcquireOrRenew(actx)
		cancel()
		if ok {
			if ctx.Err() != nil {
				r.giveUp(ctx)
				return false
			}
			return true
		}
		if err != nil && ctx.Err() == nil {
			r.log.Info("could not acquire lease; retrying", "err", err)
		}
		period := time.Duration(float64(r.cfg.RetryPeriod) * (1 - 0.2*rand.Float64()))
		t := clk.NewTimer(max(0, r.core.nextAttempt(start, period).Sub(clk.Now())))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}

// lead runs the leader's work and renews the lease until it returns. The
// renewals follow the core's lease.Renewal: one attempt when it is due,
// bounded by the time left before the renew deadline.
func (r *run) lead(ctx context.Context) error {
	clk := r.cfg.Clock
	r.setLeading(true)
	r.log.Info("started leading", "previousHolder", r.previous,
		"acquireRequest", r.wrote, "changeRead", r.changeRead)

	leadCtx, cancelLead := context.WithCancelCause(ctx)
	defer cancelLead(nil)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { done <- r.work(leadCtx) })
	defer wg.Wait()

	// Requests go on after ctx is cancelled: the lease stays renewed until
	// the leader's work has returned.
	reqCtx := context.WithoutCancel(ctx)
	var (
		ctxDone = ctx.Done()
		lost    error // non-nil once leadership is lost
		lastErr error
		cbErr   error
	)
loop:
	for {
		now := clk.Now()
		// The last attempt failed and saw another candidate hold the lease.
		taken := lastErr != nil && r.core.rec.Holder != r.cfg.Identity
		if taken || r.core.lost(now) {
			lost = fmt.Errorf("%w: lease %s/%s not renewed for %v (last error: %w)",
				ErrLeadershipLost, r.cfg.Namespace, r.cfg.Name, r.cfg.RenewDeadline, lastErr)
			r.log.Warn("leadership lost: stopping the leader's work", "err", lastErr)
			r.setLeading(false)
			cancelLead(lost)
			cbErr = <-done
			break
		}
		if r.core.renewal.Due(now) {
			lastErr = r.renew(reqCtx, now)
			continue
		}
		t := clk.NewTimer(r.core.renewal.Wake(now).Sub(now))
		select {
		case cbErr = <-done:
			t.Stop()
			break loop
		case <-ctxDone:
			ctxDone = nil
			r.log.Info("context done: stopping the leader's work", "cause", context.Cause(ctx))
			cancelLead(context.Cause(ctx))
		case <-t.C():
		}
		t.Stop()
	}
	cancelLead(errWorkReturned)
	wg.Wait()

	if lost == nil {
		r.setLeading(false)
		if r.cfg.KeepLeaseOnCancel && ctx.Err() != nil {
			r.log.Info("stopped leading; keeping the lease (KeepLeaseOnCancel)")
		} else {
			r.giveUp(ctx)
		}
	}
	if r.cfg.OnStoppedLeading != nil {
		r.cfg.OnStoppedLeading()
	}
	switch {
	case lost != nil:
		return lost
	case ctx.Err() != nil && (cbErr == nil || errors.Is(cbErr, context.Canceled) || errors.Is(cbErr, context.DeadlineExceeded)):
		return nil
	default:
		return cbErr
	}
}

var errWorkReturned = errors.New("leaderelection: the leader's work returned")

// renew makes one renewal attempt that starts at start, bounded by the
// time left before the renew deadline, and records its outcome in the
// core's lease.Renewal. It returns nil when the lease was renewed, and
// otherwise why not (the core's holder then tells whether another
// candidate took the lease).
func (r *run) renew(ctx context.Context, start time.Time) error {
	rctx, cancel := context.WithTimeout(ctx, r.core.renewal.Bound(start))
	ok, err := r.tryAcquireOrRenew(rctx)
	cancel()
	switch {
	case ok:
		r.e.mu.Lock()
		r.e.renewedAt = r.core.renewal.Last()
		r.e.renewals++
		r.e.mu.Unlock()
		return nil
	case err == nil:
		err = fmt.Errorf("lease is held by %q", r.core.rec.Holder)
	default:
		r.log.Debug("renewal failed", "err", err)
	}
	r.core.renewal.Failed(start)
	return err
}

// tryAcquireOrRenew makes one attempt and reports whether this candidate
// holds the lease after it. A false with a nil error means another
// candidate holds a valid lease.
func (r *run) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	clk := r.cfg.Clock
	// When the lease as last seen is ours to write (we lead, it was
	// released, or it expired on our clock), write without reading first:
	// the resourceVersion precondition makes the write succeed only if the
	// lease is still as we saw it, which is all a read would have checked.
	// A conflict means it changed behind our back, and we read it like
	// everyone else.
	if r.lease.Current() != nil {
		start := clk.Now()
		if act, rec := r.core.next(start, true); act == actUpdate {
			err := r.write(ctx, start, rec)
			if err == nil {
				return true, nil
			}
			if !apierrors.IsConflict(err) {
				return false, err
			}
		}
	}
	readStart := clk.Now()
	l, err := r.lease.Read(ctx)
	switch {
	case err != nil:
		return false, err
	case l != nil:
		now := clk.Now()
		if r.core.observe(now, l.ResourceVersion, recordOf(l)) {
			r.changeRead = now.Sub(readStart)
		}
		r.report()
	}
	start := clk.Now()
	act, rec := r.core.next(start, r.lease.Current() != nil)
	if act == actWait {
		return false, nil
	}
	if err := r.write(ctx, start, rec); err != nil {
		return false, err
	}
	return true, nil
}

// write creates or updates the lease with rec; the request started at
// start.
func (r *run) write(ctx context.Context, start time.Time, rec record) error {
	var prev string
	if r.lease.Current() != nil {
		prev = r.core.rec.Holder
	}
	out, err := r.lease.Write(ctx, func(l *coordinationv1.Lease) { setRecord(l, rec) })
	if err != nil {
		return err
	}
	now := r.cfg.Clock.Now()
	r.previous, r.wrote = prev, now.Sub(start)
	r.core.wrote(start, now, out.ResourceVersion, recordOf(out))
	r.report()
	return nil
}

// giveUp releases the lease if this candidate still holds it: no holder, so
// that a waiting candidate takes it at its next attempt.
func (r *run) giveUp(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RenewDeadline)
	defer cancel()
	for range 2 {
		if r.lease.Current() == nil || r.core.rec.Holder != r.cfg.Identity {
			return
		}
		out, err := r.lease.Write(rctx, func(l *coordinationv1.Lease) { setRecord(l, r.core.released(r.cfg.Clock.Now())) })
		if err == nil {
			r.core.observe(r.cfg.Clock.Now(), out.ResourceVersion, recordOf(out))
			r.core.leading = false
			r.report()
			r.log.Info("released lease")
			return
		}
		if !apierrors.IsConflict(err) {
			r.log.Warn("could not release lease; others take over when it expires", "err", err)
			return
		}
		// Changed behind our back: look again; release only if still ours.
		l, err := r.lease.Read(rctx)
		if err != nil {
			r.log.Warn("could not release lease; others take over when it expires", "err", err)
			return
		}
		if l == nil {
			return
		}
		r.core.observe(r.cfg.Clock.Now(), l.ResourceVersion, recordOf(l))
	}
}

func (r *run) setLeading(v bool) {
	r.e.mu.Lock()
	r.e.leading = v
	if v {
		r.e.renewedAt = r.core.renewal.Last()
		r.e.since = r.cfg.Clock.Now()
	}
	r.e.mu.Unlock()
	if v {
		r.e.leadingGauge.Set(1)
	} else {
		r.e.leadingGauge.Set(0)
	}
}

// report tells OnNewLeader about a change of the observed holder.
func (r *run) report() {
	h := r.core.rec.Holder
	if r.started && h == r.reported {
		return
	}
	r.started, r.reported = true, h
	r.e.mu.Lock()
	r.e.leader = h
	r.e.mu.Unlock()
	r.log.Debug("lease holder observed", "holder", h)
	if r.cfg.OnNewLeader != nil {
		r.cfg.OnNewLeader(h)
	}
}
