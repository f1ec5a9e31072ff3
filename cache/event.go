package cache

import (
	"fmt"

	"github.com/kloop-dev/kloop/watcher"
)

// ChangeKind says what happened to an object: it appeared, changed or went
// away. It is the Kind of an Event. Two other enums are different things on
// purpose: watcher.EventType names the steps of the list/watch stream
// (Bookmark and the relist markers included), and notifier.EventType is
// kubewatch's spelling (create, update, delete) that the notifier's
// configuration, metrics and messages use.
type ChangeKind uint8

const (
	// Added: New was stored under a key that held nothing.
	Added ChangeKind = iota + 1
	// Updated: New replaced Old, an earlier state of the same object (same UID).
	Updated
	// Deleted: Old was removed. New is the zero value.
	Deleted
)

func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "Added"
	case Updated:
		return "Updated"
	case Deleted:
		return "Deleted"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Event is one change to the cached state of one object. It is kloop's one
// type for such a change, from the cache to whoever acts on it: a Writer's
// Replace reports its difference as Events, an informer hands them to its
// handlers, and a controller's predicates and sources decide on them. (The
// list/watch stream below the cache has its own steps, watcher.Event.)
//
// Objects are the cache's: read-only.
//
// Kind comes after the objects so that the struct is 24 bytes, not 32: a
// snapshot's notifications are a slice of them, allocated as the first
// sync peaks.
type Event[T watcher.Object] struct {
	// Old is the state before the change: the previous state for Updated,
	// the last known state for Deleted, the zero value for Added.
	Old T
	// New is the state after the change: set for Added and Updated, the
	// zero value for Deleted.
	New  T
	Kind ChangeKind
	// Replay is true when the event re-delivers state rather than reports
	// a change: an Added of the state a receiver starts from (an informer's
	// first snapshot, the cache as it was when a handler was added, or an
	// object coming into view through a relist), and an Updated with
	// Old == New from a periodic replay of the cache. A receiver may
	// already have acted on it, so it may treat it as less urgent. A
	// Deleted is never a replay.
	Replay bool
	// FinalStateUnknown is true for a Deleted that was inferred rather than
	// seen (a relist no longer had the object, or its key now holds an
	// object with another UID): Old is the last state known, which may be
	// older than the object's final one.
	FinalStateUnknown bool
	// Merged is true for an Added or Updated that stands for more than one
	// write of the object: changes merged while the receiver lagged behind
	// (the pending changes of a key are coalesced into its latest state),
	// or the difference a relist found. New's resourceVersion is then that
	// of the latest write only, and Old may be older than the state the
	// latest write was made on.
	Merged bool
}

// Object is the object the event is about in its latest known state: New,
// or Old for a Deleted.
func (e Event[T]) Object() T {
	if e.Kind == Deleted {
		return e.Old
	}
	return e.New
}

// Key is the key of the object the event is about.
func (e Event[T]) Key() Key { return KeyOf(e.Object()) }
