package informer

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// subscriber is one registration as the informer's applying goroutine sees
// it: a listener (a queue and a goroutine of its own) or an inline handler.
// The informer calls notify, notifyAll and markSynced holding dispatchMu.
type subscriber[T watcher.Object] interface {
	notify(e cache.Event[T])
	notifyAll(events []cache.Event[T])
	// notifyKeys notifies the objects under keys, which an encoded cache
	// holds, as Added events (see cache.Writer.ReplaceLazily).
	notifyKeys(keys []cache.Key, replay bool)
	// markSynced: everything notified so far is the registration's initial
	// state.
	markSynced()
	// gone: the registration was removed and waits to be dropped from the
	// informer's list (see Informer.pruneSubs).
	gone() bool
	handlerStatus() HandlerStatus
}

// inline is a registration whose handler the informer calls itself, as it
// applies each change (HandlerOptions.Inline): no queue, no goroutine.
type inline[T watcher.Object] struct {
	inf     *Informer[T]
	name    string
	handler Handler[T]
	panics  prometheus.Counter
	synced  chan struct{} // closed by markSynced
	done    chan struct{} // closed by end

	isSynced bool // guarded by the informer's dispatchMu

	// Remove may come from anywhere, the handler itself included, so it
	// takes only this lock, never the informer's.
	mu      sync.Mutex
	calling bool // the handler is running
	removed bool
	ended   bool // done is closed
}

func newInline[T watcher.Object](inf *Informer[T], h Handler[T], name string) *inline[T] {
	return &inline[T]{
		inf:     inf,
		name:    name,
		handler: h,
		panics:  inf.metrics.handlerPanics.WithLabelValues(inf.name, name),
		synced:  make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (s *inline[T]) notify(e cache.Event[T]) {
	s.mu.Lock()
	if s.removed {
		s.mu.Unlock()
		return
	}
	s.calling = true
	s.mu.Unlock()
	s.call(e)
	s.mu.Lock()
	s.calling = false
	if s.removed {
		s.endLocked()
	}
	s.mu.Unlock()
}

func (s *inline[T]) call(e cache.Event[T]) {
	defer s.inf.recoverHandler(s.name, s.panics, e)
	s.handler.OnEvent(e)
}

func (s *inline[T]) notifyAll(events []cache.Event[T]) {
	for _, e := range events {
		s.notify(e)
	}
}

// notifyKeys hands the handler the objects of an encoded cache under keys
// as Added events, decoding one at a time.
func (s *inline[T]) notifyKeys(keys []cache.Key, replay bool) {
	for _, k := range keys {
		if obj, ok := s.inf.store.Get(k.Namespace, k.Name); ok {
			s.notify(cache.Event[T]{Kind: cache.Added, New: obj, Replay: replay, Merged: true})
		}
	}
}

func (s *inline[T]) markSynced() {
	if !s.isSynced {
		s.isSynced = true
		close(s.synced)
	}
}

func (s *inline[T]) gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

func (s *inline[T]) handlerStatus() HandlerStatus {
	h := HandlerStatus{Name: s.name, Inline: true}
	select {
	case <-s.synced:
		h.Synced = true
	default:
	}
	return h
}

// informerStopped: the informer will call no handler again.
func (s *inline[T]) informerStopped() {
	s.mu.Lock()
	if !s.calling {
		s.endLocked()
	}
	s.mu.Unlock()
}

func (s *inline[T]) endLocked() {
	if !s.ended {
		s.ended = true
		close(s.done)
	}
}

func (s *inline[T]) regName() string           { return s.name }
func (s *inline[T]) syncedCh() <-chan struct{} { return s.synced }
func (s *inline[T]) waitForSync(ctx context.Context) error {
	return s.inf.waitFor(ctx, s.synced, s.inf.name+" handler "+s.name)
}
func (s *inline[T]) doneCh() <-chan struct{} { return s.done }

func (s *inline[T]) unregister() {
	s.mu.Lock()
	if !s.removed {
		s.removed = true
		if !s.calling {
			s.endLocked()
		}
	}
	s.mu.Unlock()
	s.inf.pruneSubs.Store(true)
}
