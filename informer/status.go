package informer

import (
	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/watcher"
)

// Status is what an informer knows about itself at one moment: enough to
// tell whether it is healthy and how busy it is. Status reads it at call
// time from what the informer keeps anyway (its cache, its queues, its
// metrics); nothing is counted twice.
type Status struct {
	// Name is Options.Name.
	Name string
	// Resource and Scope are what a Factory's informer watches (the
	// resource as "plural.version.group"); empty for an informer made
	// without a Factory.
	Resource string
	Scope    Scope
	// Synced: the first snapshot has been applied to the cache.
	Synced bool
	// Objects in the cache, and the resourceVersion it has caught up with.
	Objects         int
	ResourceVersion string
	// CacheBytes estimates the heap the cached objects take (the
	// kloop_informer_cache_bytes gauge): a sample of them sized with the
	// allocator's rounding, shared metadata counted once, times Objects.
	CacheBytes int64
	// Encoded: the cache keeps objects encoded (Memory.Encoded, or
	// Memory.EncodedUnder with the memory budget under it).
	Encoded bool
	// CacheWhy says why the cache is encoded or, when Memory.EncodedUnder
	// is set, why it is not: "Memory.Encoded is set", or the memory budget
	// compared with EncodedUnder. Empty when neither option is set.
	CacheWhy string
	// Pending counts what waits in the delta queue between the source and
	// the cache (a snapshot counts as one).
	Pending int
	// Changes applied to the cache since New: the kloop_informer_changes_total
	// counters.
	Adds, Updates, Deletes, DeletesFinalStateUnknown uint64
	// Handlers are the registrations, in the order they were added.
	Handlers []HandlerStatus
	// Source is the source's status. A *watcher.Reflector reports it all;
	// another Source reports only LastError (and PhaseStopped).
	Source watcher.Status
}

// HandlerStatus is one registration's state.
type HandlerStatus struct {
	Name string
	// Pending events not yet delivered to the handler (always 0 for an
	// inline handler, which has no queue).
	Pending int
	// Synced: the handler has been given the informer's initial state.
	Synced bool
	// Inline: the handler is called on the informer's goroutine
	// (HandlerOptions.Inline), so it has no queue and no queue-depth metric.
	Inline bool
}

// statusSource is implemented by sources that report more than LastError
// (*watcher.Reflector).
type statusSource interface {
	Status() watcher.Status
}

// Status reports the informer's state; see Status. It may be called from
// any goroutine and does not wait for handlers.
func (inf *Informer[T]) Status() Status {
	s := Status{
		Name:            inf.name,
		Objects:         inf.store.Len(),
		ResourceVersion: inf.store.ResourceVersion(),
	}
	s.CacheBytes = inf.size.bytes(s.Objects)
	s.Encoded, s.CacheWhy = inf.encoded, inf.cacheWhy
	select {
	case <-inf.syncedCh:
		s.Synced = true
	default:
	}
	inf.qmu.Lock()
	s.Pending = inf.queue.pending()
	inf.qmu.Unlock()
	if src, ok := inf.src.(statusSource); ok {
		s.Source = src.Status()
	} else {
		s.Source.LastError = inf.src.LastError()
	}
	if m := inf.metrics; m != nil {
		s.Adds, s.Updates = kmetrics.Count(m.adds), kmetrics.Count(m.updates)
		s.Deletes, s.DeletesFinalStateUnknown = kmetrics.Count(m.deletes), kmetrics.Count(m.deletesUnknown)
	}
	inf.dispatchMu.Lock()
	subs := append([]subscriber[T](nil), inf.subs...)
	inf.dispatchMu.Unlock()
	for _, sub := range subs {
		if !sub.gone() {
			s.Handlers = append(s.Handlers, sub.handlerStatus())
		}
	}
	return s
}

// Status reports every informer the factory holds, in creation order, each
// with its Resource and Scope.
func (f *Factory) Status() []Status {
	f.mu.Lock()
	entries := append([]*factoryEntry(nil), f.order...)
	f.mu.Unlock()
	out := make([]Status, 0, len(entries))
	for _, e := range entries {
		s := e.status()
		s.Resource, s.Scope = e.resource, e.scope
		out = append(out, s)
	}
	return out
}
