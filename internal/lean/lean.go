// Package lean carries the informer package's memory choices
// (informer.Memory) down to the places that act on them: the watcher
// package's protobuf decoder, which can leave managedFields out and share
// label sets while it decodes, so that they are never allocated; and an
// encoded cache, which can report a snapshot's new objects by key, so that
// they are decoded one at a time as handlers take them, never all at once.
//
// It is not part of the watcher's API. A ListerWatcher used on its own
// decodes whole, unshared objects; only an informer, whose cache is
// read-only, asks for lean ones.
package lean

// Decoding says what a decoder may leave out or share.
type Decoding struct {
	// DropManagedFields skips metadata.managedFields.
	DropManagedFields bool
	// ShareLabels gives objects with identical labels one shared map.
	ShareLabels bool
}

// WithDecoding returns opts, a watcher.Scope, set to decode as d. The
// watcher package sets it when it is initialised (this package cannot
// import it).
var WithDecoding func(opts any, d Decoding) any

// ReplaceLazily is cache.Writer.ReplaceWith for an encoded store (writer
// a *cache.Writer[T], snap a *cache.Snapshot[T]) that decodes no object
// the store did not hold: changes are the []cache.Event[T] of deleted and
// updated objects, added the []cache.Key of the others. ok is false for a
// store that is not encoded; nothing was done then. The cache package
// sets it when it is initialised.
var ReplaceLazily func(writer, snap any, rv string) (changes, added any, ok bool)

// KeysOf returns the []cache.Key of every object in store, a
// *cache.Store[T], without decoding any; ok is false for a store that is
// not encoded. The cache package sets it.
var KeysOf func(store any) (keys any, ok bool)
