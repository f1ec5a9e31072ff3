package informer

import (
	"time"

	"github.com/kloop-dev/kloop/watcher"
)

// Handler receives an informer's notifications for one registration. The
// informer calls it from one goroutine per registration, one call at a time,
// so a Handler needs no locking of its own against itself.
//
// Objects passed to a Handler are the cache's: read-only, shared with every
// other handler and lister. Copy (cache.Copy) before modifying.
type Handler[T watcher.Object] interface {
	// OnAdd: obj appeared. inInitialList is true when obj was part of the
	// state the registration started from (the informer's first snapshot,
	// or the replay for a handler added later).
	OnAdd(obj T, inInitialList bool)
	// OnUpdate: the object changed from old to new. A replay (see
	// HandlerOptions.ReplayInterval) calls it with old == new.
	OnUpdate(old, new T)
	// OnDelete: the object is gone. See Deleted.
	OnDelete(d Deleted[T])
}

// Deleted describes an object that went away.
//
// When FinalStateUnknown is false, Obj is the object's last state as the
// delete event carried it. When it is true the informer did not see the
// delete itself, only that the object is gone (a relist no longer had it,
// or the key now holds an object with another UID), and Obj is the last
// state the informer knew, which may be older than the object's final one.
type Deleted[T watcher.Object] struct {
	Obj               T
	FinalStateUnknown bool
}

// HandlerFuncs adapts functions to a Handler. A nil function ignores its
// notifications.
type HandlerFuncs[T watcher.Object] struct {
	AddFunc    func(obj T, inInitialList bool)
	UpdateFunc func(old, new T)
	DeleteFunc func(d Deleted[T])
}

var _ Handler[watcher.Object] = HandlerFuncs[watcher.Object]{}

// OnAdd implements Handler.
func (f HandlerFuncs[T]) OnAdd(obj T, inInitialList bool) {
	if f.AddFunc != nil {
		f.AddFunc(obj, inInitialList)
	}
}

// OnUpdate implements Handler.
func (f HandlerFuncs[T]) OnUpdate(old, new T) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(old, new)
	}
}

// OnDelete implements Handler.
func (f HandlerFuncs[T]) OnDelete(d Deleted[T]) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(d)
	}
}

// HandlerOptions configures one registration. The zero value works.
type HandlerOptions struct {
	// Name identifies the handler in logs and metrics. Default: "handler-N"
	// in registration order.
	Name string
	// ReplayInterval, when positive, re-delivers every cached object to this
	// handler as OnUpdate(obj, obj) this often: a periodic nudge for
	// handlers that reconcile against the outside world. It reads the
	// informer's cache; it does not relist from the API server (client-go
	// calls this "resync"). Default 0: no replay.
	ReplayInterval time.Duration
}
