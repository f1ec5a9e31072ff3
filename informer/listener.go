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

// listener is one registration with a queue and a goroutine of its own, so
// that a slow or stuck handler delays nobody but itself.
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

// notify queues e. It never blocks on the handler.
func (l *listener[T]) notify(e cache.Event[T]) {
	l.push(e.Key(), noteOf(e))
}

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

// notifyAll queues events (a snapshot's, see cache.Writer.Replace) in one
// go: one lock and one wake-up for all of them.
func (l *listener[T]) notifyAll(events []cache.Event[T]) {
	if len(events) == 0 {
		return
	}
	l.mu.Lock()
	l.q.pushAll(events)
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
// notifyKeys queues Added notes for the objects of an encoded cache under
// keys. An idle queue keeps the keys and reads each object as the handler
// takes it (see resolve); a busy one gets the objects now.
func (l *listener[T]) notifyKeys(keys []cache.Key, replay bool) {
	if len(keys) == 0 {
		return
	}
	l.pushKeys(keys, noteAdd, replay)
}

// replayKeys queues a periodic replay of an encoded cache's objects under
// keys: an idle queue keeps the keys and reads each object as the handler
// takes it, so that the replay never holds the whole cache decoded.
func (l *listener[T]) replayKeys(keys []cache.Key) {
	if len(keys) == 0 {
		return
	}
	l.pushKeys(keys, noteUpdate, true)
}

func (l *listener[T]) pushKeys(keys []cache.Key, kind noteKind, replay bool) {
	l.mu.Lock()
	if !l.q.pushKeys(keys, kind, replay) {
		for _, k := range keys {
			if obj, ok := l.inf.store.Get(k.Namespace, k.Name); ok {
				n := note[T]{kind: kind, obj: obj, replay: replay}
				if kind == noteUpdate {
					n.old = obj
				}
				l.q.push(k, n)
			}
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

// resolve turns n, the note of key taken from a batch of keys (an Added
// note, or a periodic replay's Updated one), into what the handler is to
// get. It reads the cache with the informer's dispatch lock held, so that
// what the cache holds is what has been notified: a note queued since for
// key is merged into n (it keeps n's place, as a change of a queued key
// does; a replay gives way to it), and without one the cache still holds
// the object the batch was made of.
func (l *listener[T]) resolve(key cache.Key, n note[T]) note[T] {
	l.inf.dispatchMu.Lock()
	l.mu.Lock()
	p, pending := l.q.fifo.get(key)
	if pending {
		l.q.fifo.remove(key)
		if p.preSync && n.preSync {
			l.q.preSync-- // two notes become one
		}
	}
	l.mu.Unlock()
	var obj T
	found := false
	if !pending {
		obj, found = l.inf.store.Get(key.Namespace, key.Name)
	}
	l.inf.dispatchMu.Unlock()
	switch {
	case pending && n.kind == noteUpdate:
		// A replay says "this is the object now"; the change queued since
		// says it better.
		p.preSync = p.preSync || n.preSync
		return p
	case pending:
		m, keep := merge(n, p)
		if !keep {
			return note[T]{preSync: n.preSync || p.preSync} // nothing to deliver
		}
		return m
	case found:
		// The object as the cache holds it now, not one write's state.
		n.obj, n.merged = obj, true
		if n.kind == noteUpdate {
			n.old = obj
		}
		l.inf.pacer.step() // obj was decoded for this delivery
		return n
	}
	return note[T]{preSync: n.preSync}
}

func (l *listener[T]) markSynced() {
	l.mu.Lock()
	l.q.mark()
	l.checkSyncedLocked()
	l.mu.Unlock()
}

func (l *listener[T]) gone() bool { return false } // removeListener drops it at once

func (l *listener[T]) handlerStatus() HandlerStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return HandlerStatus{Name: l.name, Pending: l.q.len(), Synced: l.isSynced}
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
		n, key, lazy, ok := l.q.pop()
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
			if lazy {
				n = l.resolve(key, n)
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

// deliver hands the handler the events n stands for: one, or a delete and
// then an add.
func (l *listener[T]) deliver(n note[T]) {
	switch n.kind {
	case noteAdd:
		l.call(cache.Event[T]{Kind: cache.Added, New: n.obj, Replay: n.replay, Merged: n.merged})
	case noteUpdate:
		l.call(cache.Event[T]{Kind: cache.Updated, Old: n.old, New: n.obj, Replay: n.replay, Merged: n.merged})
	case noteDelete:
		l.call(cache.Event[T]{Kind: cache.Deleted, Old: n.old, FinalStateUnknown: n.fsu})
	case noteDeleteThenAdd:
		l.call(cache.Event[T]{Kind: cache.Deleted, Old: n.old, FinalStateUnknown: n.fsu})
		l.call(cache.Event[T]{Kind: cache.Added, New: n.obj, Replay: n.replay, Merged: n.merged})
	}
}

// call hands e to the handler, unless the registration has been removed
// (also between the two events of a delete-then-add), turning a panic into
// a log line and a metric so that one broken handler does not take the
// informer down with it.
func (l *listener[T]) call(e cache.Event[T]) {
	select {
	case <-l.stop:
		return
	default:
	}
	defer l.inf.recoverHandler(l.name, l.panics, e)
	l.handler.OnEvent(e)
}

// recoverHandler, deferred around a handler's call, logs and counts its
// panic, if any.
func (inf *Informer[T]) recoverHandler(name string, panics prometheus.Counter, e cache.Event[T]) {
	if r := recover(); r != nil {
		panics.Inc()
		obj := e.Object()
		inf.logger.Error("informer: handler panicked; event dropped",
			"informer", inf.name, "handler", name, "event", e.Kind.String(),
			"namespace", obj.GetNamespace(), "name", obj.GetName(), "rv", obj.GetResourceVersion(),
			"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	}
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
