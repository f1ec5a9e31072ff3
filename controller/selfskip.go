package controller

import (
	"context"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/ownwrite"
)

// A reconcile woken only by the watch events of what the same key's
// reconciles wrote has nothing to learn: each of those writes was made by
// a reconcile that knew what it wrote, and the server returned the state
// it stored (with its resourceVersion) to that reconcile. Such a reconcile
// is skipped (Options.ReconcileOwnWrites turns that off). The writes are
// known exactly, per key: the client reports each write made with a
// reconcile's ctx (internal/ownwrite), and the controller keeps the latest
// of them with the key whose reconcile made them. A change counts only
// when it is one write's event, seen as it happened:
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

// selfWrites remembers which key's reconcile made each of the latest
// writes of a controller's reconciles (ownwrite.Kept of them).
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

// wrote reports whether c is the event of a write a reconcile of key made
// (see above).
func (w *selfWrites[K]) wrote(key K, c *Cause) bool {
	if c.ResourceVersion == "" || c.Replay || (c.Change != cache.Added && c.Change != cache.Updated) {
		return false
	}
	at, ok := ownwrite.WriteOf(c.Namespace, c.Name, c.ResourceVersion)
	if !ok {
		return false
	}
	w.mu.Lock()
	k, ok := w.recent.Get(at)
	w.mu.Unlock()
	return ok && k == key
}

// selfInflicted reports whether the reconcile of key with causes s would be
// woken only by the events of key's own writes, so that it is skipped.
func (c *Controller[K]) selfInflicted(key K, s *causeSet) bool {
	if c.opts.ReconcileOwnWrites || s.n == 0 || s.other {
		return false
	}
	for i := range s.n {
		if !c.self.wrote(key, s.at(i)) {
			return false
		}
	}
	if s.more != nil {
		for i := range s.more.unsure {
			if !c.self.wrote(key, &s.more.unsure[i]) {
				return false
			}
		}
	}
	return true
}

// skip ends the turn of key, whose causes s were all its own writes,
// without a Reconcile call: it is counted, kept in the history (Outcome
// OutcomeSkipped) and traced, and the key is done until it is triggered
// again.
func (c *Controller[K]) skip(ctx context.Context, key K, s causeSet) {
	c.m.selfSkipped.Inc()
	rec := record[K]{key: key, start: time.Now(), outcome: OutcomeSkipped, causes: s}
	if c.opts.Tracer != nil {
		_, span := c.startSpan(ctx, key, &s)
		c.done(span, rec, Result{}, nil)
	} else {
		c.hist.add(rec)
	}
	c.log.Debug(skippedMessage, "key", keyString(key), "causes", s.String())
	c.queue.Done(key)
}

// skippedMessage is logged at Debug level for every reconcile skipped
// because its causes were all the key's own writes.
const skippedMessage = "Skipped reconcile: woken only by its own writes"
