package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// LowPriority is the workqueue priority of keys enqueued for objects of an
// informer's initial list and for periodic replays: work that only confirms
// the state is queued behind keys for real changes (the workqueue's aging
// still gets it done).
const LowPriority = -100

// Queue is the part of the workqueue a Source feeds. *workqueue.Queue[K]
// implements it.
type Queue[K comparable] interface {
	// Add enqueues k at normal priority.
	Add(k K)
	// AddWithPriority enqueues k at the given priority; higher goes first.
	AddWithPriority(k K, priority int)
	// AddAfter enqueues k once d has passed.
	AddAfter(k K, d time.Duration)
}

// Source feeds a controller's queue with keys.
type Source[K comparable] interface {
	// Register subscribes q to the source's events. name identifies the
	// subscription in logs and metrics. It must not block and starts no
	// goroutine of its own; the events flow from goroutines the source's
	// owner (usually an informer) runs.
	Register(name string, q Queue[K]) (Subscription, error)
}

// Subscription is a Source's registration with a queue.
// *informer.Registration implements it.
type Subscription interface {
	// WaitForSync blocks until every key of the state the subscription
	// started from has been enqueued, or ctx is done, and returns an error
	// that says why not.
	WaitForSync(ctx context.Context) error
	// Remove ends the subscription without waiting: no event begins to
	// be handled after it returns, and none is being handled once Done is
	// closed.
	Remove()
	// Done is closed once the subscription will enqueue no more keys.
	Done() <-chan struct{}
}

// Informer is the part of *informer.Informer[T] that sources use.
type Informer[T watcher.Object] interface {
	AddHandler(h informer.Handler[T], opts informer.HandlerOptions) (*informer.Registration, error)
}

// For is the source for a controller's primary type: every event of an
// object that passes all preds enqueues the object's own key
// (namespace/name).
func For[T watcher.Object](inf Informer[T], preds ...Predicate[T]) Source[cache.Key] {
	return &eventSource[T, cache.Key]{
		inf:   inf,
		role:  "for",
		preds: preds,
		keys: func(e Event[T], add func(cache.Key)) {
			add(cache.KeyOf(e.Object))
		},
	}
}

// Owns is the source for objects a controller creates and owns: every
// event of an object that passes all preds enqueues the key of its
// controller owner (see ControllerOwnerKey) when that owner has the given
// group and kind. Objects without such an owner are ignored. An update that
// moves the object to another owner enqueues both owners. Deletes found only
// by a relist map like any other delete, from the last known state.
func Owns[T watcher.Object](inf Informer[T], owner schema.GroupKind, preds ...Predicate[T]) Source[cache.Key] {
	return &eventSource[T, cache.Key]{
		inf:   inf,
		role:  "owns-" + owner.String(),
		preds: preds,
		keys: func(e Event[T], add func(cache.Key)) {
			k, ok := ControllerOwnerKey(e.Object, owner)
			if ok {
				add(k)
			}
			if e.Kind == cache.Updated {
				if ko, ok := ControllerOwnerKey(e.Old, owner); ok && ko != k {
					add(ko)
				}
			}
		},
	}
}

// Watches is the source for any other type: every event of an object that
// passes all preds enqueues the keys mapKeys returns for it (for an update,
// for the new state). mapKeys must be quick and must not block: it runs on
// the informer's delivery goroutine for this subscription.
func Watches[T watcher.Object, K comparable](inf Informer[T], mapKeys func(obj T) []K, preds ...Predicate[T]) Source[K] {
	return &eventSource[T, K]{
		inf:   inf,
		role:  "watches",
		preds: preds,
		keys: func(e Event[T], add func(K)) {
			for _, k := range mapKeys(e.Object) {
				add(k)
			}
		},
	}
}

// eventSource turns an informer's notifications into events, filters them
// and maps them to keys.
type eventSource[T watcher.Object, K comparable] struct {
	inf   Informer[T]
	role  string
	preds []Predicate[T]
	keys  func(e Event[T], add func(K))
}

func (s *eventSource[T, K]) Register(name string, q Queue[K]) (Subscription, error) {
	e := &enqueuer[K]{q: q}
	e.add = e.enqueue // made once: a method value made per event would be allocated per event
	h := informer.HandlerFuncs[T]{
		AddFunc: func(obj T, initial bool) {
			s.deliver(e, Event[T]{Kind: cache.Added, Object: obj, InInitialList: initial})
		},
		UpdateFunc: func(old, obj T) {
			s.deliver(e, Event[T]{Kind: cache.Updated, Object: obj, Old: old})
		},
		DeleteFunc: func(d informer.Deleted[T]) {
			s.deliver(e, Event[T]{Kind: cache.Deleted, Object: d.Obj, FinalStateUnknown: d.FinalStateUnknown})
		},
	}
	reg, err := s.inf.AddHandler(h, informer.HandlerOptions{Name: name + "/" + s.role})
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// enqueuer adds a subscription's keys to its queue. The informer calls a
// handler from one goroutine, one notification at a time, so one enqueuer
// per subscription serves every event.
type enqueuer[K comparable] struct {
	q   Queue[K]
	low bool // the current event only confirms state: enqueue at LowPriority
	add func(K)
}

func (e *enqueuer[K]) enqueue(k K) {
	if e.low {
		e.q.AddWithPriority(k, LowPriority)
	} else {
		e.q.Add(k)
	}
}

func (s *eventSource[T, K]) deliver(q *enqueuer[K], e Event[T]) {
	for _, p := range s.preds {
		if !p(e) {
			return
		}
	}
	// The initial list and replays (old == new) only confirm state the
	// controller may already have acted on; real changes go first.
	q.low = e.InInitialList || (e.Kind == cache.Updated && any(e.Old) == any(e.Object))
	s.keys(e, q.add)
}
