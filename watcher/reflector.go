package watcher

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// Reflector keeps a consumer up to date with one API resource: it lists (a
// streaming list or a paginated LIST), then watches from the list's
// resourceVersion, relists when that resourceVersion expires, and backs off
// on errors. It reports what it sees as Events to the emit function given to
// Run. See the package documentation for the guarantees.
//
// LastError and Status may be called from any goroutine.
type Reflector[T Object] struct {
	lw      ListerWatcher[T]
	cfg     resolved
	m       *machine[T] // owned by the goroutine in Run
	metrics *reflectorMetrics
	running atomic.Bool

	mu         sync.Mutex
	lastErr    error
	lastRV     string
	errChanged chan struct{} // closed when lastErr changes, then replaced
	listMeta   metav1.ListMeta
	phase      Phase
	lastEvent  time.Time
}

// NewReflector returns a reflector over lw. It starts nothing; call Run.
func NewReflector[T Object](lw ListerWatcher[T], cfg Options) *Reflector[T] {
	var zero T
	r := &Reflector[T]{lw: lw, cfg: cfg.resolve(fmt.Sprintf("%T", zero))}
	r.m = newMachine[T](r.cfg)
	if d := r.cfg.raisedWatchTimeout; d > 0 {
		r.cfg.logger.Warn("MinWatchTimeout below the floor; using the floor", "reflector", r.cfg.name, "asked", d, "floor", WatchTimeoutFloor)
	}
	m, err := newReflectorMetrics(r.cfg.registerer, r.cfg.name)
	if err != nil {
		r.cfg.logger.Warn("reflector metrics not registered", "reflector", r.cfg.name, "err", err)
	}
	r.metrics = m
	return r
}

// Name is Options.Name, or its default.
func (r *Reflector[T]) Name() string { return r.cfg.name }

// LastError returns the latest error of a list or watch (naming the call and wrapping its cause), or nil
// once a snapshot completed or a watch opened after it. Use errors.Is and
// errors.As on it: apierrors.IsForbidden(r.LastError()) tells a missing RBAC
// rule.
func (r *Reflector[T]) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// ErrorChanged returns a channel that is closed the next time LastError
// changes (to another error, or to nil). Call it again for the change after
// that. It lets a waiter react to an error as it happens, without polling:
// take the channel, then read LastError, then wait on the channel.
func (r *Reflector[T]) ErrorChanged() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errChanged == nil {
		r.errChanged = make(chan struct{})
	}
	return r.errChanged
}

// ListMeta is the metadata of the latest LIST page the server returned
// (the zero value before the first): its resourceVersion, continue token,
// remaining item count, and what it says of parameters added through
// Options.ListOptions (a KEP-5866 server echoes an applied shardSelector in
// shardInfo; one without the feature ignores the parameter and says
// nothing).
func (r *Reflector[T]) ListMeta() metav1.ListMeta {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listMeta
}

// addListOptions lets Options.ListOptions add to a request's options.
func (r *Reflector[T]) addListOptions(opts *metav1.ListOptions) {
	if r.cfg.listOptions != nil {
		r.cfg.listOptions(opts)
	}
}

// Run lists and watches until ctx is done, calling emit for every event, in
// order, from Run's goroutine. It returns nil when ctx is done, and
// ErrAlreadyRunning if another Run of this reflector has not returned yet. It
// starts no goroutine; when it returns, every watch it opened is stopped and
// it holds no reference to emitted objects.
//
// Each Run begins with a snapshot (RelistStart … RelistDone). If ctx ends
// while a snapshot is being emitted, Run returns without its RelistDone.
// emit should return promptly once ctx is done.
func (r *Reflector[T]) Run(ctx context.Context, emit func(Event[T])) error {
	if !r.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer r.running.Store(false)

	m, clk := r.m, r.cfg.clock
	m.restart()
	r.mu.Lock()
	r.phase = phaseOf(m)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.phase = PhaseStopped
		r.mu.Unlock()
	}()
	r.cfg.logger.Debug("reflector starting", "reflector", r.cfg.name, "mode", r.cfg.mode.String(), "rv", m.lastRV)

	var w apiwatch.Interface
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	var idle clock.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()

	// act lives across iterations: its options' address is taken below, so
	// a variable declared in the loop would be a heap allocation per event.
	var act action
	for ctx.Err() == nil {
		act = m.act
		if act.kind != actReceive && w != nil {
			w.Stop()
			w = nil
		}
		var (
			evs []Event[T]
			err error
			now time.Time
		)
		switch act.kind {
		case actList:
			r.metrics.lists.Inc()
			r.addListOptions(&act.opts)
			page, lerr := r.lw.List(ctx, act.opts)
			if ctx.Err() != nil {
				return nil
			}
			if lerr == nil {
				r.mu.Lock()
				r.listMeta = page.ListMeta
				r.mu.Unlock()
			}
			now = clk.Now()
			evs, err = m.listed(now, page, lerr)

		case actWatch:
			r.metrics.watches.Inc()
			r.addListOptions(&act.opts)
			nw, werr := r.lw.Watch(ctx, act.opts)
			if ctx.Err() != nil {
				if nw != nil {
					nw.Stop()
				}
				return nil
			}
			if werr == nil && nw == nil {
				werr = fmt.Errorf("%w: Watch returned neither a watch nor an error", ErrUnexpectedObject)
			}
			w = nw
			err = m.watchOpened(clk.Now(), werr)

		case actReceive:
			var timeout <-chan time.Time
			switch {
			case act.delay > 0 && idle == nil:
				idle = clk.NewTimer(act.delay)
				timeout = idle.C()
			case act.delay > 0:
				idle.Stop()
				idle.Reset(act.delay)
				timeout = idle.C()
			case idle != nil:
				idle.Stop()
			}
			select {
			case <-ctx.Done():
				return nil
			case ev, ok := <-w.ResultChan():
				now = clk.Now()
				if !ok {
					err = m.closed(now)
				} else {
					evs, err = m.received(now, ev)
				}
			case <-timeout:
				err = m.timerFired(clk.Now())
			}

		case actWait:
			r.cfg.logger.Debug("reflector waiting", "reflector", r.cfg.name, "delay", act.delay)
			t := clk.NewTimer(act.delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
			err = m.timerFired(clk.Now())
		}

		r.mu.Lock()
		if r.lastErr != m.lastErr && r.errChanged != nil {
			close(r.errChanged)
			r.errChanged = nil
		}
		r.lastErr, r.lastRV, r.phase = m.lastErr, m.lastRV, phaseOf(m)
		if len(evs) > 0 {
			r.lastEvent = now
		}
		r.mu.Unlock()
		if err != nil {
			r.metrics.errors.Inc()
			r.cfg.logger.Warn("reflector error", "reflector", r.cfg.name, "err", err, "retry", m.act.kind.String(), "delay", m.act.delay)
			if r.cfg.onError != nil {
				r.cfg.onError(err)
			}
		}
		if len(evs) > 0 {
			if !r.deliver(ctx, evs, emit) {
				return nil
			}
			r.metrics.setLastRV(m.lastRV)
		}
	}
	return nil
}

// deliver emits evs in order and drops the references to them. It reports
// false if ctx ended in the middle of a snapshot.
func (r *Reflector[T]) deliver(ctx context.Context, evs []Event[T], emit func(Event[T])) bool {
	defer clear(evs)
	many := len(evs) > 1
	for i := range evs {
		if many && ctx.Err() != nil {
			return false
		}
		r.metrics.events[evs[i].Type].Inc()
		emit(evs[i])
		evs[i] = Event[T]{}
	}
	return true
}
