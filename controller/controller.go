package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/workqueue"
)

// Defaults of Options.
const (
	// DebounceBound is how many times Options.Debounce a key that keeps
	// being triggered is held at most.
	DebounceBound      = 10
	DefaultName        = "controller"
	DefaultSyncTimeout = 2 * time.Minute
	// DefaultDrainTimeout is below the manager's default shutdown bound
	// (30 s), so that a drain cut short still leaves the manager time to
	// stop its caches and release the lease.
	DefaultDrainTimeout = 25 * time.Second
)

var (
	// ErrAlreadyStarted is returned by a second call to Start.
	ErrAlreadyStarted = errors.New("controller: already started")
	// ErrSyncFailed wraps the error of a source that did not sync; Start
	// returns it without having started any worker.
	ErrSyncFailed = errors.New("controller: sources did not sync")
	// ErrReconcileTimeout is the context.Cause of a Reconcile that ran past
	// Options.ReconcileTimeout.
	ErrReconcileTimeout = errors.New("controller: reconcile timed out")
	// ErrDrainTimeout is the context.Cause of the Reconcile calls still
	// running when Options.DrainTimeout ran out during a stop.
	ErrDrainTimeout = errors.New("controller: drain timeout: stopping")
)

// Options configures a Controller. The zero value works: one worker, the
// workqueue's default rate limiter, no reconcile timeout, a 2-minute sync
// timeout, a 25-second drain, metrics on the kloop registry, logs to
// slog.Default().
type Options[K comparable] struct {
	// Name identifies the controller in logs ("controller" key), metrics
	// (the "controller" label) and its workqueue's metrics. Give every
	// controller in a program its own. Default "controller".
	Name string

	// Workers is how many keys are reconciled at once (never the same key
	// twice). Default 1.
	Workers int

	// RateLimiter decides how long a failed key waits before its retry.
	// Default: the workqueue's (5 ms doubling per failure up to 1000 s,
	// and at most 10 retries a second overall, burst 100).
	RateLimiter workqueue.RateLimiter[K]

	// ReconcileTimeout, when positive, bounds each Reconcile call: its ctx
	// is cancelled with cause ErrReconcileTimeout after that long. Default 0:
	// no bound.
	ReconcileTimeout time.Duration

	// MaxRetries, when positive, is how many times a failing key is retried
	// before it is dropped: forgotten by the rate limiter, not requeued,
	// and reported to Dropped (or logged). Default 0: retry until it
	// succeeds, returns a TerminalError, or is no longer triggered.
	MaxRetries int

	// Dropped, if set, is called (on the worker, after the last failed
	// Reconcile of key) when a key is dropped after MaxRetries; it then owns
	// the reporting of that error and the controller does not log it.
	Dropped func(ctx context.Context, key K, err error)

	// SyncTimeout bounds how long Start waits for its sources' initial
	// state before it gives up with ErrSyncFailed. Default 2 minutes;
	// negative means wait as long as ctx allows.
	SyncTimeout time.Duration

	// WaitForSync, if set, is waited for with the sources, within
	// SyncTimeout, before the first worker starts; its error fails Start
	// as a source's does. An App sets it to wait for every informer it
	// holds, so that a reconcile's first read of a kind that is not one of
	// its sources finds that kind's cache synced. Default nil: only the
	// sources are waited for.
	WaitForSync func(ctx context.Context) error

	// Started, if set, is called once, when the sources (and WaitForSync)
	// have synced and the workers start: the controller's queue then holds
	// its starting state, and every change from then on reaches it as a
	// change. An App uses it for App.Ready.
	Started func()

	// DrainTimeout bounds how long, once Start's ctx is done, the Reconcile
	// calls in flight may take to finish: after it their ctx is cancelled
	// with cause ErrDrainTimeout. Start still returns only when they have.
	// Default 25 s; negative cancels them at once.
	DrainTimeout time.Duration

	// SkipLeaderElection marks a controller that may run on every replica;
	// by default a manager with leader election starts it only on the
	// leader.
	SkipLeaderElection bool

	// Logger receives the controller's logs, with key "controller" set to
	// Name. Default slog.Default().
	Logger *slog.Logger

	// Registerer receives the controller's metrics and its workqueue's.
	// Default: the kloop metrics registry.
	Registerer prometheus.Registerer

	// Debounce, when positive, holds a key that a source triggered until
	// no new trigger of it has come for Debounce, so that a burst of
	// changes is reconciled once, after it: the reconciles of a key that
	// only sources trigger start at least Debounce apart. A key whose
	// triggers never pause that long is still reconciled once
	// DebounceBound (10 × Debounce) has passed since the first trigger it
	// was held for, so a key that changes for ever runs at least that
	// often. Retries, RequeueAfter and Enqueue are not held. Held keys
	// wait in the workqueue as delayed keys (and count in its retries
	// metric). Default 0: every trigger is reconciled as soon as a worker
	// is free (kube-rs's Config::debounce is the same idea).
	Debounce time.Duration

	// ReconcileOwnWrites turns off the skip of self-inflicted reconciles.
	// By default a key whose every trigger is the watch event of a write
	// made by one of its own reconciles (through the App's client, with
	// the Reconcile call's ctx) is not reconciled again for it: that
	// reconcile knew what it wrote, and the event says nothing new. The
	// skip is counted in kloop_controller_skipped_reconciles_total, kept
	// in Status (Outcome OutcomeSkipped, Status.Skipped) and traced. A
	// change that may fold in another writer's (an informer that lagged,
	// a relist), a replay, a delete, and every Retry, RequeueAfter,
	// Enqueue or Handover is reconciled as usual. Set it for a reconcile
	// that must run again after its own writes (one that writes in steps,
	// a step per pass, and returns without asking to come back).
	ReconcileOwnWrites bool

	// OwnWrite, if set, tells whether the object namespace/name at
	// resourceVersion was written by this program, to mark such changes in
	// a reconcile's causes (Cause.Own) and find the keys a controller keeps
	// waking by its own writes. An App sets its client's Wrote. It is
	// called on the workers, once per kept cause. It only marks causes;
	// the skip (ReconcileOwnWrites) knows the key's own writes itself.
	OwnWrite func(namespace, name, resourceVersion string) bool

	// Tracer, if set, traces every reconcile: a span named "reconcile "
	// + Name, with the attributes kloop.controller, kloop.key,
	// kloop.causes (each cause as the logs write it), kloop.causes.total,
	// kloop.self_triggered and kloop.outcome ("success", "requeue_after",
	// "requeue", "error"), and the error as its status. Its context is the
	// Reconcile call's, so the writes of the App's client in the call are
	// its children. The span links to the span of each own write among
	// its causes (OwnWriteSpan); a reconcile woken only by own writes is
	// a child of the latest of them, so a self-triggered loop is one
	// trace. Default nil: no spans. An App sets it from its
	// kloop.Options.Traces (package otlp's exporter, for one).
	Tracer trace.Tracer
	// OwnWriteSpan, with Tracer, returns the span of the program's write
	// that left namespace/name at resourceVersion (invalid when unknown).
	// An App sets it from its client.
	OwnWriteSpan func(namespace, name, resourceVersion string) trace.SpanContext

	// Clock is the time of the controller's delays: RequeueAfter, the
	// retries' back-off (the default RateLimiter's), Debounce. A test
	// passes a fake clock (k8s.io/utils/clock/testing.FakeClock) and
	// steps it: a key requeued after an hour is reconciled again once the
	// clock has been stepped by an hour, with no wait. Timeouts
	// (ReconcileTimeout, SyncTimeout, DrainTimeout) and the measured
	// durations keep the real clock. Default: the real clock; an App sets
	// its own (kloop.Options.Clock).
	Clock clock.Clock
}

// Controller reconciles keys of type K: sources enqueue keys, workers hand
// them to the Reconciler, and the result decides whether and when a key
// comes back. See the package documentation for the guarantees.
type Controller[K comparable] struct {
	name    string
	rec     Reconciler[K]
	opts    Options[K]
	log     *slog.Logger
	queue   *workqueue.Queue[K]
	m       *controllerMetrics
	recent  recentErrors
	started atomic.Bool
	clock   clock.Clock
	epoch   time.Time // for trigger times with Debounce
	// causes holds the triggers of the keys waiting in queue until a
	// worker takes them.
	causes pendingCauses[K]
	// hot follows the keys woken by the program's own writes.
	hot hotLoops[K]
	// self remembers which key's reconcile made each recent write.
	self selfWrites[K]
	// hist keeps the latest reconciles, for Status: one history per
	// worker.
	hist histories[K]
	// span is what each reconcile's span starts with (Options.Tracer).
	span spanStart

	mu         sync.Mutex
	sources    []Source[K]
	registered bool // Start has taken the sources; Watch is closed

	// admit, if set, says which keys may be handed to the Reconciler (see
	// Restrict). Which keys are in flight is the queue's to know.
	admit atomic.Pointer[func(K) bool]
}

// New returns a controller that hands keys to rec. It starts nothing: add
// sources with Watch, then call Start.
func New[K comparable](rec Reconciler[K], opts Options[K]) (*Controller[K], error) {
	if rec == nil {
		return nil, errors.New("controller: nil Reconciler")
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Debounce < 0 {
		return nil, fmt.Errorf("controller %q: Options.Debounce is %v; give a positive duration, or 0 for none", opts.Name, opts.Debounce)
	}
	m, err := newControllerMetrics(opts.Name, opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("controller %q: %w", opts.Name, err)
	}
	c := &Controller[K]{
		name:  opts.Name,
		rec:   rec,
		opts:  opts,
		log:   opts.Logger.With("controller", opts.Name),
		clock: opts.Clock,
		epoch: opts.Clock.Now(),
		m:     m,
		span:  newSpanStart(opts.Name),
		hist:  newHistories[K](opts.Workers),
		queue: workqueue.New(workqueue.Options[K]{
			Name:        opts.Name,
			Registerer:  opts.Registerer,
			RateLimiter: opts.RateLimiter,
			Clock:       opts.Clock,
		}),
	}
	c.causes.own = c.self.took
	return c, nil
}

// Name returns Options.Name.
func (c *Controller[K]) Name() string { return c.name }

// NeedLeaderElection reports whether the controller runs only on the
// leader (see Options.SkipLeaderElection).
func (c *Controller[K]) NeedLeaderElection() bool { return !c.opts.SkipLeaderElection }

// Watch adds a source. Call it before Start.
func (c *Controller[K]) Watch(src Source[K]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.registered {
		return fmt.Errorf("controller %q: Watch after Start", c.name)
	}
	c.sources = append(c.sources, src)
	return nil
}

// Enqueue asks for key to be reconciled, as a source would; its cause
// says "Enqueue". It does nothing once the controller has stopped.
func (c *Controller[K]) Enqueue(key K) {
	c.note(key, Cause{Source: causeEnqueue})
	c.queue.Add(key)
}

// triggerTime is the time of a source's trigger as Debounce needs it: 0
// without Debounce, which then reads no clock.
func (c *Controller[K]) triggerTime() int64 {
	if c.opts.Debounce <= 0 {
		return 0
	}
	return int64(c.clock.Since(c.epoch)) + 1
}

// hold puts a key a worker took back in the queue, with its causes, if
// Debounce still holds it, and reports whether it did.
func (c *Controller[K]) hold(key K, s *causeSet) bool {
	if c.opts.Debounce <= 0 || s.held == 0 {
		return false
	}
	d := int64(c.opts.Debounce)
	due := min(s.last+d, s.held+DebounceBound*d)
	wait := due - c.triggerTime()
	if wait <= 0 {
		return false
	}
	c.causes.putBack(key, *s)
	c.queue.AddAfter(key, time.Duration(wait))
	c.queue.Done(key)
	return true
}

// note records a trigger of key, before the key is added to the queue, so
// that the worker that takes the key finds it.
func (c *Controller[K]) note(key K, cause Cause) {
	c.causes.add(key, cause, 0)
}

// Start registers the sources, waits until each has enqueued its initial
// state (and for Options.WaitForSync), then runs Options.Workers workers until ctx is done. Then it stops
// taking keys, lets the Reconcile calls in flight finish (cancelling them
// after Options.DrainTimeout) and returns once every worker has exited.
//
// It returns nil after a stop through ctx, an error wrapping ErrSyncFailed
// (and the source's error) when a source did not sync, or
// ErrAlreadyStarted. A controller runs once.
func (c *Controller[K]) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer c.queue.ShutDown()

	c.mu.Lock()
	c.registered = true
	sources := c.sources
	c.mu.Unlock()

	subs := make([]Subscription, 0, len(sources))
	defer func() {
		for _, s := range subs {
			s.Remove()
		}
		for _, s := range subs {
			<-s.Done()
		}
	}()
	for i, src := range sources {
		sub, err := src.Register(fmt.Sprintf("%s-%d", c.name, i), c.sourceQueue(src))
		if err != nil {
			return fmt.Errorf("controller %q: registering source %d: %w", c.name, i, err)
		}
		subs = append(subs, sub)
	}

	c.log.Info("Waiting for sources to sync", "sources", len(subs))
	syncCtx, cancelSync := ctx, context.CancelFunc(func() {})
	if c.opts.SyncTimeout > 0 {
		syncCtx, cancelSync = context.WithTimeout(ctx, c.opts.SyncTimeout)
	}
	for i, s := range subs {
		if err := s.WaitForSync(syncCtx); err != nil {
			cancelSync()
			if ctx.Err() != nil {
				// Stopped while waiting: not a failure of the source.
				return nil
			}
			return fmt.Errorf("controller %q: source %d: %w: %w", c.name, i, ErrSyncFailed, err)
		}
	}
	if c.opts.WaitForSync != nil {
		if err := c.opts.WaitForSync(syncCtx); err != nil {
			cancelSync()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("controller %q: %w: %w", c.name, ErrSyncFailed, err)
		}
	}
	cancelSync()

	c.log.Info("Starting workers", "workers", c.opts.Workers)
	if c.opts.Started != nil {
		c.opts.Started()
	}
	c.m.workers.Set(float64(c.opts.Workers))
	// Reconcile calls outlive ctx by up to DrainTimeout, so they get a
	// context of their own that keeps ctx's values.
	rctx, cancelReconciles := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelReconciles(nil)
	var wg sync.WaitGroup
	for _, h := range c.hist {
		wg.Go(func() { c.work(ctx, rctx, h) })
	}

	<-ctx.Done()
	c.log.Info("Stopping workers; waiting for reconciles in flight")
	c.queue.ShutDown()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	drain := time.NewTimer(max(c.opts.DrainTimeout, 0))
	defer drain.Stop()
	select {
	case <-done:
	case <-drain.C:
		c.log.Warn("Drain timeout: cancelling reconciles in flight", "drainTimeout", c.opts.DrainTimeout)
		cancelReconciles(ErrDrainTimeout)
		<-done
	}
	c.log.Info("All workers stopped")
	return nil
}

// Restrict narrows (or widens) the keys the controller hands to its
// Reconciler to those admit accepts, and waits until no Reconcile of a key
// it rejects is in flight, or ctx is done (then it returns ctx's error; the
// restriction stays). A rejected key that comes out of the queue is dropped
// unreconciled and forgotten by the rate limiter; if it is enqueued again
// while admit accepts it, it is reconciled as usual.
//
// It is how a replica gives work away without overlap: restrict, wait,
// then let the new owner start. admit may answer from state that changes
// (call Restrict again after each change, to wait for the keys it now
// rejects); it is called by the workers and, while Restrict waits, with
// the workqueue's lock held, so it must be fast and must not call the
// controller. nil admits every key.
func (c *Controller[K]) Restrict(ctx context.Context, admit func(K) bool) error {
	if admit == nil {
		c.admit.Store(nil)
		return nil
	}
	c.admit.Store(&admit)
	// A worker that read the previous admit holds its key in the queue's
	// flight from Get to Done, so the queue sees every key that got past it.
	return c.queue.WaitInFlight(ctx, func(k K) bool { return !admit(k) })
}

// admitted reports whether key may be reconciled now (see Restrict).
func (c *Controller[K]) admitted(key K) bool {
	admit := c.admit.Load()
	return admit == nil || (*admit)(key)
}

// work hands keys to the Reconciler until ctx is done.
func (c *Controller[K]) work(ctx, rctx context.Context, h *history[K]) {
	for ctx.Err() == nil {
		key, err := c.queue.Get(ctx)
		if err != nil {
			return
		}
		causes := c.causes.take(key)
		if !c.admitted(key) {
			c.queue.Forget(key)
			c.queue.Done(key)
			c.m.skipped.Inc()
			continue
		}
		if c.hold(key, &causes) {
			continue
		}
		if c.markOwn(key, &causes) {
			c.skip(rctx, key, causes, h)
			continue
		}
		c.m.active.Inc()
		c.reconcile(rctx, key, &causes, h)
		c.m.active.Dec()
		c.queue.Done(key)
	}
}

// markOwn sets Cause.Own on the causes that are this program's writes,
// and reports whether the reconcile is to be skipped: every trigger was
// the event of a write of key's own reconciles (see selfskip.go) and
// Options.ReconcileOwnWrites is not set. It runs when a worker takes the
// key, not as the event arrives, since the watch event of a write can
// reach the informer before the write's response has been recorded; by
// now the reconcile that wrote has ended.
func (c *Controller[K]) markOwn(key K, s *causeSet) (skip bool) {
	skip = c.self.take(key, s) && !c.opts.ReconcileOwnWrites
	if c.opts.OwnWrite == nil {
		return skip
	}
	for i := range s.n {
		k := s.at(i)
		if k.ResourceVersion == "" || k.Change == cache.Deleted || k.Own {
			continue
		}
		k.Own = c.opts.OwnWrite(k.Namespace, k.Name, k.ResourceVersion)
	}
	return skip
}

// reconcile runs one Reconcile call, keeps its record in h and acts on
// its outcome.
func (c *Controller[K]) reconcile(ctx context.Context, key K, causes *causeSet, h *history[K]) {
	if c.opts.ReconcileTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.opts.ReconcileTimeout, ErrReconcileTimeout)
		defer cancel()
	}
	// The failure logs below carry the reconcile's id too, so that they can
	// be matched with what the reconcile logged.
	cc := newCallContext(ctx, c.log, key, causes, &c.self)
	call := &cc.h
	log := &call.logger
	ctx = cc
	var span trace.Span
	if c.opts.Tracer != nil {
		ctx, span = c.startSpan(ctx, key, &call.causes)
	}
	start := time.Now()
	res, err := c.call(ctx, key)
	dur := time.Since(start)
	c.m.duration.Observe(dur.Seconds())
	c.watchLoop(key, log, &call.causes, start)
	rec := record[K]{key: key, start: start, dur: dur, causes: call.causes}

	switch {
	case err == nil && res.RequeueAfter > 0:
		c.queue.Forget(key)
		c.note(key, Cause{Source: causeRequeueAfter})
		c.queue.AddAfter(key, res.RequeueAfter)
		c.m.requeueAfter.Inc()
		rec.outcome = OutcomeRequeueAfter
		c.done(h, span, &rec, res, nil)
		log.Debug(reconciledMessage, "requeueAfter", res.RequeueAfter)
		return
	case err == nil && res.Requeue:
		c.queue.Forget(key)
		c.note(key, Cause{Source: causeRequeue})
		c.queue.Add(key) // the key is in flight: taken again after Done
		c.m.requeue.Inc()
		rec.outcome = OutcomeRequeue
		c.done(h, span, &rec, res, nil)
		log.Debug(reconciledMessage, "requeue", true)
		return
	case err == nil:
		c.queue.Forget(key)
		c.m.success.Inc()
		rec.outcome = OutcomeSuccess
		c.done(h, span, &rec, res, nil)
		log.Debug(reconciledMessage)
		return
	}

	c.m.failed.Inc()
	c.m.errors.Inc()
	if errors.Is(context.Cause(ctx), ErrReconcileTimeout) {
		c.m.timeouts.Inc()
	}
	retries := c.queue.NumRequeues(key)
	terminal := unretryable(err)
	rec.outcome, rec.err, rec.terminal, rec.retries = OutcomeError, err.Error(), terminal, retries
	c.done(h, span, &rec, res, err)
	c.recent.add(rec.reconcile())
	var pe *panicError
	if errors.As(err, &pe) {
		c.m.panics.Inc()
		log = log.With("stack", string(pe.Stack))
	}
	if terminal {
		c.m.terminal.Inc()
		c.queue.Forget(key)
		log.Error("Reconcile failed with a terminal error; not retrying", "err", err, "causes", causes.String())
		return
	}
	if res.RequeueAfter > 0 || res.Requeue {
		log.Warn("Reconcile returned both an error and RequeueAfter or Requeue; RequeueAfter is ignored, as is Requeue: the error is retried with back-off",
			"requeueAfter", res.RequeueAfter, "requeue", res.Requeue)
	}
	if c.opts.MaxRetries > 0 && retries >= c.opts.MaxRetries {
		c.queue.Forget(key)
		if c.opts.Dropped != nil {
			c.opts.Dropped(ctx, key, err)
			return
		}
		log.Error("Reconcile failed; dropping the key after too many retries", "err", err, "retries", retries, "causes", causes.String())
		return
	}
	c.note(key, Cause{Source: causeRetry})
	c.queue.AddRateLimited(key)
	log.Error("Reconcile failed; will retry", "err", err, "retries", retries, "causes", causes.String())
}

// reconciledMessage is logged at Debug level after every reconcile that
// returned no error; tests wait for it (testenv/await.Reconciled).
const reconciledMessage = "Reconciled"

// call runs Reconcile, turning a panic into a *panicError.
func (c *Controller[K]) call(ctx context.Context, key K) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = Result{}, &panicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return c.rec.Reconcile(ctx, key)
}
