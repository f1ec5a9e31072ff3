package informer

import (
	"time"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// Handler receives an informer's events for one registration: every change
// to the cache, in the order the cache went through them, as a cache.Event.
//
// By default the informer calls a Handler from one goroutine of the
// registration's own, one event at a time, so a Handler needs no locking
// of its own against itself, and a slow one delays nobody else. With
// HandlerOptions.Inline it is called on the informer's own goroutine
// instead; see there.
//
// Objects in events are the cache's: read-only, shared with every other
// handler and lister. Copy (cache.Copy) before modifying.
type Handler[T watcher.Object] interface {
	OnEvent(e cache.Event[T])
}

// HandlerFuncs adapts one function per kind of event to a Handler, for
// handlers that treat the kinds apart. A nil function ignores its events.
//
//   - AddFunc gets an Added event's New, and its Replay as inInitialList:
//     true when obj was part of the state the registration started from
//     (the informer's first snapshot, the replay for a handler added later,
//     or an object coming into view through Relist).
//   - UpdateFunc gets an Updated event's Old and New; a periodic replay
//     (HandlerOptions.ReplayInterval) calls it with old == new.
//   - DeleteFunc gets a Deleted event's Old and its FinalStateUnknown.
//     When finalStateUnknown is false, obj is the object's last state as
//     the delete event carried it. When it is true the informer did not
//     see the delete itself, only that the object is gone (a relist no
//     longer had it, or the key now holds an object with another UID), and
//     obj is the last state the informer knew, which may be older than the
//     object's final one.
//
// A handler that treats every event alike implements Handler itself, or
// sets all three functions.
type HandlerFuncs[T watcher.Object] struct {
	AddFunc    func(obj T, inInitialList bool)
	UpdateFunc func(old, new T)
	DeleteFunc func(obj T, finalStateUnknown bool)
}

var _ Handler[watcher.Object] = HandlerFuncs[watcher.Object]{}

// OnEvent implements Handler: it calls the function for e's kind.
func (f HandlerFuncs[T]) OnEvent(e cache.Event[T]) {
	switch e.Kind {
	case cache.Added:
		if f.AddFunc != nil {
			f.AddFunc(e.New, e.Replay)
		}
	case cache.Updated:
		if f.UpdateFunc != nil {
			f.UpdateFunc(e.Old, e.New)
		}
	case cache.Deleted:
		if f.DeleteFunc != nil {
			f.DeleteFunc(e.Old, e.FinalStateUnknown)
		}
	}
}

// HandlerOptions configures one registration. The zero value works.
type HandlerOptions struct {
	// Name identifies the handler in logs and metrics. Default: "handler-N"
	// in registration order.
	Name string
	// ReplayInterval, when positive, re-delivers every cached object to this
	// handler as an Updated event with Old == New and Replay set, this
	// often: a periodic nudge for handlers that reconcile against the
	// outside world. It reads the informer's cache; it does not relist from
	// the API server (client-go calls this "resync"). Default 0: no replay.
	// It needs a registration of its own goroutine: not with Inline.
	ReplayInterval time.Duration
	// Inline calls the handler on the informer's own goroutine, as each
	// change is applied to the cache, rather than on a goroutine of its
	// own behind a queue of its own. It saves that goroutine, the queue
	// and a hand-over per event, which is right for a handler whose every
	// call is short and never blocks, such as one that adds a key to a
	// workqueue (controller sources register so). A handler that may block
	// must not be inline: while it runs, the cache and every other handler
	// of the informer wait. An inline handler must not call the informer's
	// AddHandler, AddIndex or Seed (they wait for it); reading the
	// cache and Registration.Remove are fine. Events are not merged for it:
	// it hears each change the cache goes through.
	Inline bool
}
