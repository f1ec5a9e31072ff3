package controller

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// LowPriority is the workqueue priority of keys enqueued for events that
// re-deliver state rather than report a change (cache.Event.Replay: an
// informer's initial list, periodic replays): work that only confirms the
// state is queued behind keys for real changes (the workqueue's aging still
// gets it done).
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
	// owner (usually an informer) runs. The sources of this package add
	// to q on the informer's own goroutine, as it applies each change, so
	// q's Add methods must not block (a *workqueue.Queue's never do).
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
		cause: "For",
		kind:  kindOf[T](),
		preds: preds,
		keys: func(e cache.Event[T], add func(cache.Key)) {
			add(e.Key())
		},
	}
}

// Owns is the source for objects a controller creates and owns: every
// event of an object that passes all preds enqueues the key of its
// controller owner (see controllerOwnerKey) when that owner has the given
// group and kind. Objects without such an owner are ignored. An update that
// moves the object to another owner enqueues both owners. Deletes found only
// by a relist map like any other delete, from the last known state.
func Owns[T watcher.Object](inf Informer[T], owner schema.GroupKind, preds ...Predicate[T]) Source[cache.Key] {
	return &eventSource[T, cache.Key]{
		inf:   inf,
		role:  "owns-" + owner.String(),
		cause: "Owns",
		kind:  kindOf[T](),
		preds: preds,
		keys: func(e cache.Event[T], add func(cache.Key)) {
			k, ok := controllerOwnerKey(e.Object(), owner)
			if ok {
				add(k)
			}
			if e.Kind == cache.Updated {
				if ko, ok := controllerOwnerKey(e.Old, owner); ok && ko != k {
					add(ko)
				}
			}
		},
	}
}

// Watches is the source for any other type: every event of an object that
// passes all preds enqueues the keys mapKeys returns for it (for an update,
// for the new state). mapKeys must be quick and must not block: it runs on
// the informer's goroutine, as the informer applies each change, and the
// cache and the informer's other handlers wait for it.
func Watches[T watcher.Object, K comparable](inf Informer[T], mapKeys func(obj T) []K, preds ...Predicate[T]) Source[K] {
	return &eventSource[T, K]{
		inf:   inf,
		role:  "watches",
		cause: "Watches",
		kind:  kindOf[T](),
		preds: preds,
		keys: func(e cache.Event[T], add func(K)) {
			for _, k := range mapKeys(e.Object()) {
				add(k)
			}
		},
	}
}

// eventSource filters an informer's events and maps them to keys.
type eventSource[T watcher.Object, K comparable] struct {
	inf   Informer[T]
	role  string
	cause string // Cause.Source
	kind  string // Cause.Kind, from T's name; "" to read it from each object
	preds []Predicate[T]
	keys  func(e cache.Event[T], add func(K))
}

// kindOf is the name of T's type without its pointer (the kind, for a
// typed object), or "" for a type that carries its kind (unstructured).
func kindOf[T watcher.Object]() string {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Name() {
	case "Unstructured", "PartialObjectMetadata", "":
		return ""
	}
	return t.Name()
}

// Register subscribes an inline handler (informer.HandlerOptions.Inline):
// the informer calls it as it applies each change, and it adds the event's
// keys to q at once. q de-duplicates and never blocks, so a queue and a
// goroutine of the subscription's own would only add a hand-over per event.
func (s *eventSource[T, K]) Register(name string, q Queue[K]) (Subscription, error) {
	e := &enqueuer[T, K]{src: s, q: q}
	e.cq, _ = q.(causeQueue[K])
	e.add = e.enqueue // made once: a method value made per event would be allocated per event
	reg, err := s.inf.AddHandler(e, informer.HandlerOptions{Name: name + "/" + s.role, Inline: true})
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// enqueuer is one subscription's handler: it filters events and adds their
// keys to the queue. The informer calls an inline handler one event at a
// time, so low needs no lock.
type enqueuer[T watcher.Object, K comparable] struct {
	src   *eventSource[T, K]
	q     Queue[K]
	cq    causeQueue[K] // q, when it records causes (a Controller's)
	low   bool          // the current event only confirms state: enqueue at LowPriority
	cause Cause         // the current event's, when cq is set
	add   func(K)
}

func (e *enqueuer[T, K]) enqueue(k K) {
	if e.cq != nil {
		p := 0
		if e.low {
			p = LowPriority
		}
		e.cq.addCause(k, p, &e.cause)
		return
	}
	if e.low {
		e.q.AddWithPriority(k, LowPriority)
	} else {
		e.q.Add(k)
	}
}

// OnEvent implements informer.Handler.
func (e *enqueuer[T, K]) OnEvent(ev cache.Event[T]) {
	for _, p := range e.src.preds {
		if !p(ev) {
			return
		}
	}
	// Replays only confirm state the controller may already have acted
	// on; real changes go first.
	e.low = ev.Replay
	if e.cq != nil {
		obj := ev.Object()
		kind := e.src.kind
		if kind == "" {
			kind = obj.GetObjectKind().GroupVersionKind().Kind
		}
		e.cause = Cause{
			Source: e.src.cause, Kind: kind,
			Namespace: obj.GetNamespace(), Name: obj.GetName(), ResourceVersion: obj.GetResourceVersion(),
			Change: ev.Kind, Replay: ev.Replay, merged: ev.Merged,
		}
	}
	e.src.keys(ev, e.add)
}

// causeQueue is the queue a Controller gives its sources: it records each
// key's cause with the key.
type causeQueue[K comparable] interface {
	addCause(k K, priority int, c *Cause)
}

// sourceQueue is the Queue a Controller gives one source: it records a
// cause with every key the source adds, then adds the key to the
// controller's workqueue.
type sourceQueue[K comparable] struct {
	c     *Controller[K]
	cause Cause // for keys added through the Queue methods
}

// sourceQueue returns the queue src registers with. A source other than
// this package's is named in causes by its String method, if it has one.
func (c *Controller[K]) sourceQueue(src Source[K]) *sourceQueue[K] {
	name := "Source"
	if s, ok := src.(fmt.Stringer); ok {
		name = s.String()
	}
	return &sourceQueue[K]{c: c, cause: Cause{Source: name}}
}

func (q *sourceQueue[K]) Add(k K) { q.AddWithPriority(k, 0) }

func (q *sourceQueue[K]) AddWithPriority(k K, priority int) { q.addCause(k, priority, &q.cause) }

func (q *sourceQueue[K]) AddAfter(k K, d time.Duration) {
	q.c.note(k, q.cause)
	q.c.queue.AddAfter(k, d)
}

func (q *sourceQueue[K]) addCause(k K, priority int, c *Cause) {
	q.c.causes.add(k, *c, q.c.triggerTime())
	if priority == 0 {
		q.c.queue.Add(k)
	} else {
		q.c.queue.AddWithPriority(k, priority)
	}
}

// Map is src with every key it enqueues turned into another by to, such as
// an object's key into a key that also names its cluster. The keys keep
// the causes src gives them.
func Map[K1, K2 comparable](src Source[K1], to func(K1) K2) Source[K2] {
	return mapped[K1, K2]{src: src, to: to}
}

type mapped[K1, K2 comparable] struct {
	src Source[K1]
	to  func(K1) K2
}

// String names src in causes, as src would itself.
func (m mapped[K1, K2]) String() string {
	if s, ok := m.src.(fmt.Stringer); ok {
		return s.String()
	}
	return "Source"
}

func (m mapped[K1, K2]) Register(name string, q Queue[K2]) (Subscription, error) {
	mq := mapQueue[K1, K2]{q: q, to: m.to}
	if cq, ok := q.(causeQueue[K2]); ok {
		return m.src.Register(name, causeMapQueue[K1, K2]{mq, cq})
	}
	return m.src.Register(name, mq)
}

// mapQueue is the queue a Map source gives src: it turns each key and adds
// it to q.
type mapQueue[K1, K2 comparable] struct {
	q  Queue[K2]
	to func(K1) K2
}

func (q mapQueue[K1, K2]) Add(k K1)                       { q.q.Add(q.to(k)) }
func (q mapQueue[K1, K2]) AddWithPriority(k K1, p int)    { q.q.AddWithPriority(q.to(k), p) }
func (q mapQueue[K1, K2]) AddAfter(k K1, d time.Duration) { q.q.AddAfter(q.to(k), d) }

// causeMapQueue is a mapQueue over a queue that records causes: src's
// causes go through with the turned keys.
type causeMapQueue[K1, K2 comparable] struct {
	mapQueue[K1, K2]
	cq causeQueue[K2]
}

func (q causeMapQueue[K1, K2]) addCause(k K1, p int, c *Cause) { q.cq.addCause(q.to(k), p, c) }
