package informer

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// listener is one registration: its own queue and goroutine, so that a slow
// or stuck handler delays nobody but itself.
type listener[T watcher.Object] struct {
	inf     *Informer[T]
	name    string
	handler Handler[T]
	replay  time.Duration

	mu       sync.Mutex
	q        listenerQueue[T]
	isSynced bool

	wake     chan struct{} // capacity 1: "the queue is not empty"
	stop     chan struct{} // closed by Remove
	stopOnce sync.Once
	done     chan struct{} // closed when run returns, or by Remove if run never will
	synced   chan struct{} // closed once the initial state is delivered

	// Guarded by the informer's lifecycle lock.
	started, removed bool

	depth  prometheus.Gauge
	panics prometheus.Counter
}

func newListener[T watcher.Object](inf *Informer[T], h Handler[T], name string, replay time.Duration) *listener[T] {
	return &listener[T]{
		inf:     inf,
		name:    name,
		handler: h,
		replay:  replay,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		synced:  make(chan struct{}),
		depth:   inf.metrics.handlerDepth.WithLabelValues(inf.name, name),
		panics:  inf.metrics.handlerPanics.WithLabelValues(inf.name, name),
	}
}

// push queues a notification. It never blocks on the handler.
func (l *listener[T]) push(k cache.Key, n note[T]) {
	l.mu.Lock()
	l.q.push(k, n)
	l.checkSyncedLocked()
	depth := l.q.len()
	l.mu.Unlock()
	l.depth.Set(float64(depth))
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// pushChanges queues the notifications of a snapshot's changes (see
// cache.Writer.Replace) in one go: one lock and one wake-up for all of
// them. initial marks adds as part of the informer's initial list.
func (l *listener[T]) pushChanges(changes []cache.Event[T], initial bool) {
	if len(changes) == 0 {
		return
	}
	l.mu.Lock()
	l.q.reserve(len(changes))
	for _, c := range changes {
		switch c.Kind {
		case cache.Added:
			l.q.push(cache.KeyOf(c.New), note[T]{kind: noteAdd, obj: c.New, initial: initial})
		case cache.Updated:
			l.q.push(cache.KeyOf(c.New), note[T]{kind: noteUpdate, old: c.Old, obj: c.New})
		case cache.Deleted:
			l.q.push(cache.KeyOf(c.Old), note[T]{kind: noteDelete, old: c.Old, fsu: true})
		}
	}
	l.checkSyncedLocked()
	depth := l.q.len()
	l.mu.Unlock()
	l.depth.Set(float64(depth))
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// markSynced: everything queued so far is the registration's initial state.
func (l *listener[T]) markSynced() {
	l.mu.Lock()
	l.q.mark()
	l.checkSyncedLocked()
	l.mu.Unlock()
}

func (l *listener[T]) checkSyncedLocked() {
	if !l.isSynced && l.q.synced() {
		l.isSynced = true
		close(l.synced)
	}
}

// run delivers notifications until ctx is done or the listener is removed.
func (l *listener[T]) run(ctx context.Context) {
	defer close(l.done)
	var tick <-chan time.Time
	if l.replay > 0 {
		t := time.NewTicker(l.replay)
		defer t.Stop()
		tick = t.C
	}
	for {
		l.mu.Lock()
		n, ok := l.q.pop()
		depth := l.q.len()
		l.mu.Unlock()
		if ok {
			l.depth.Set(float64(depth))
			select {
			case <-ctx.Done():
				return
			case <-l.stop:
				return
			default:
			}
			l.deliver(n)
			l.mu.Lock()
			l.q.delivered(n)
			l.checkSyncedLocked()
			l.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-l.wake:
		case <-tick:
			l.inf.replayTo(l)
		}
	}
}

func (l *listener[T]) deliver(n note[T]) {
	switch n.kind {
	case noteAdd:
		l.call("OnAdd", n.obj, func() { l.handler.OnAdd(n.obj, n.initial) })
	case noteUpdate:
		l.call("OnUpdate", n.obj, func() { l.handler.OnUpdate(n.old, n.obj) })
	case noteDelete:
		l.call("OnDelete", n.old, func() { l.handler.OnDelete(Deleted[T]{Obj: n.old, FinalStateUnknown: n.fsu}) })
	case noteDeleteThenAdd:
		l.call("OnDelete", n.old, func() { l.handler.OnDelete(Deleted[T]{Obj: n.old, FinalStateUnknown: n.fsu}) })
		l.call("OnAdd", n.obj, func() { l.handler.OnAdd(n.obj, n.initial) })
	}
}

// call runs one callback, unless the registration has been removed (also
// between the two calls of a delete-then-add), turning a panic into a log
// line and a metric so that one broken handler does not take the informer
// down with it.
func (l *listener[T]) call(method string, obj T, fn func()) {
	select {
	case <-l.stop:
		return
	default:
	}
	defer func() {
		if r := recover(); r != nil {
			l.panics.Inc()
			l.inf.logger.Error("informer: handler panicked; notification dropped",
				"informer", l.inf.name, "handler", l.name, "method", method,
				"namespace", obj.GetNamespace(), "name", obj.GetName(), "rv", obj.GetResourceVersion(),
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	fn()
}

// remove stops the listener without waiting for it. started says whether
// run was started (and so will close done); if not, it never will be.
func (l *listener[T]) remove(started bool) {
	l.stopOnce.Do(func() {
		close(l.stop)
		if !started {
			close(l.done)
		}
	})
	l.inf.metrics.handlerDepth.DeleteLabelValues(l.inf.name, l.name)
}

// Registration is one handler's subscription to an informer, returned by
// AddHandler.
type Registration struct {
	r registrant
}

type registrant interface {
	regName() string
	syncedCh() <-chan struct{}
	waitForSync(ctx context.Context) error
	unregister()
	doneCh() <-chan struct{}
}

// Name is HandlerOptions.Name, or the name given by default.
func (r *Registration) Name() string { return r.r.regName() }

// Synced is closed once the informer has synced and this handler has
// returned from every notification of the state it started from: the
// informer's first snapshot, or, for a handler added later, the replay of
// the cache at the time it was added.
func (r *Registration) Synced() <-chan struct{} { return r.r.syncedCh() }

// WaitForSync blocks until Synced is closed, ctx is done or the informer
// stops; in the latter cases it returns a *SyncError that names the
// informer and the handler and wraps the informer's last list/watch error
// (if any) and why waiting ended.
func (r *Registration) WaitForSync(ctx context.Context) error { return r.r.waitForSync(ctx) }

// Remove unsubscribes the handler. It does not wait: no callback begins
// after it returns, but one already running (the one that called Remove,
// if it was called from the handler) runs to its end. Done says when that
// has happened. Remove is idempotent and may be called from anywhere,
// including the handler itself.
func (r *Registration) Remove() { r.r.unregister() }

// Done is closed once the handler will never be called again: after Remove,
// when the callback running at the time (if any) has returned, or after the
// informer has stopped, when its last callback has returned. To remove a
// handler and wait for it, from outside the handler:
//
//	reg.Remove()
//	<-reg.Done()
func (r *Registration) Done() <-chan struct{} { return r.r.doneCh() }

func (l *listener[T]) regName() string           { return l.name }
func (l *listener[T]) syncedCh() <-chan struct{} { return l.synced }
func (l *listener[T]) waitForSync(ctx context.Context) error {
	return l.inf.waitFor(ctx, l.synced, l.inf.name+" handler "+l.name)
}
func (l *listener[T]) unregister()             { l.inf.removeListener(l) }
func (l *listener[T]) doneCh() <-chan struct{} { return l.done }
