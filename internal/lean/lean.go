// Package lean carries the informer package's memory choices
// (informer.Memory) down to the one other place that acts on them: the
// watcher package's protobuf decoder, which can leave managedFields out and
// share label sets while it decodes, so that they are never allocated.
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
