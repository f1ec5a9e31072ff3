package controller

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/ownwrite"
)

// A reconcile woken only by the watch events of what the same key's
// reconciles wrote has nothing to learn: each of those writes was made by
// a reconcile that knew what it wrote, and the server returned the state
// it stored (with its resourceVersion) to that reconcile. Such a reconcile
// is skipped (Options.ReconcileOwnWrites turns that off). The writes are
// known exactly, per key: the client reports each write made with a
// reconcile's ctx (internal/ownwrite), and the controller keeps each with
// the key whose reconcile made it until its event is taken. A change
// counts only when it is one write's event, seen as it happened, once:
//   - an Added or Updated of an object at the resourceVersion a reconcile
//     of the same key wrote;
//   - not merged with other writes of the object (cache.Event.Merged: an
//     informer that lagged, or a relist), since another writer's change
//     may be folded into it;
//   - not a replay, not a delete (a delete is never a write that returns
//     the object's state), not a trigger of the controller's own (Retry,
//     RequeueAfter, Enqueue, Handover) or of a custom source.
// A write by another program, another replica of this one, another
// controller of the App or another key's reconcile is not one of the key's
// own; nor is a write whose response never came back (it has no
// resourceVersion to match).

// selfWrites remembers which key's reconcile made each of the writes of a
// controller's reconciles whose events it has yet to take: a write is
// forgotten once its event has been matched (take), or after ownwrite.Kept
// later writes, so that a settled controller holds none.
type selfWrites[K comparable] struct {
	mu     sync.Mutex
	recent ownwrite.Recent[K]
}

func (w *selfWrites[K]) add(key K, namespace, name, rv string) {
	at, ok := ownwrite.WriteOf(namespace, name, rv)
	if !ok {
		return
	}
	w.mu.Lock()
	w.recent.Add(at, key)
	w.mu.Unlock()
}

// match returns the write c is the event of, and whether a reconcile of
// key made it (see above). Caller holds mu.
func (w *selfWrites[K]) match(key K, c *Cause) (ownwrite.Write, bool) {
	if c.ResourceVersion == "" || c.Replay || (c.Change != cache.Added && c.Change != cache.Updated) {
		return ownwrite.Write{}, false
	}
	at, ok := ownwrite.WriteOf(c.Namespace, c.Name, c.ResourceVersion)
	if !ok {
		return at, false
	}
	k, ok := w.recent.Get(at)
	return at, ok && k == key
}

// took reports whether c, a trigger of key, is the event of a write a
// reconcile of key made, and forgets that write if so.
func (w *selfWrites[K]) took(key K, c *Cause) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.match(key, c)
	if ok {
		w.recent.Forget(at)
	}
	return ok
}

// take matches the triggers of s, key's turn, with the writes of key's
// reconciles: it marks the kept causes that match Own, forgets the writes
// matched (their events are handled), and reports whether every trigger
// matched. All are matched before any is forgotten, so that two triggers
// of one write (two sources of one kind) both match.
func (w *selfWrites[K]) take(key K, s *causeSet) (all bool) {
	all = s.n > 0 && !s.other
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.recent.Len() == 0 {
		return false // no write to match: a controller that writes nothing, or one settled
	}
	var mine [causesKept]ownwrite.Write
	n := 0
	for i := range s.n {
		k := s.at(i)
		if at, ok := w.match(key, k); ok {
			k.Own = true
			mine[n] = at
			n++
		} else {
			all = false
		}
	}
	var unsure []Cause
	if s.more != nil {
		unsure = s.more.unsure
	}
	for i := range unsure {
		if _, ok := w.match(key, &unsure[i]); !ok {
			all = false
		}
	}
	for _, at := range mine[:n] {
		w.recent.Forget(at)
	}
	for i := range unsure {
		if at, ok := w.match(key, &unsure[i]); ok {
			w.recent.Forget(at)
		}
	}
	return all
}

// skip ends the turn of key, whose causes s were all its own writes,
// without a Reconcile call: it is counted, kept in the history (Outcome
// OutcomeSkipped) and traced, and the key is done until it is triggered
// again.
func (c *Controller[K]) skip(ctx context.Context, key K, s causeSet, h *history[K]) {
	c.m.selfSkipped.Inc()
	rec := record[K]{key: key, start: time.Now(), outcome: OutcomeSkipped, causes: s}
	var span trace.Span
	if c.opts.Tracer != nil {
		_, span = c.startSpan(ctx, key, &s)
	}
	c.done(h, span, &rec, Result{}, nil)
	c.log.Debug(skippedMessage, "key", keyString(key), "causes", s.String())
	c.queue.Done(key)
}

// skippedMessage is logged at Debug level for every reconcile skipped
// because its causes were all the key's own writes.
const skippedMessage = "Skipped reconcile: woken only by its own writes"
