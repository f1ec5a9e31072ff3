// Package ownwrite carries, in the context of a reconcile, where the writes
// made with that context are reported: the controller puts a Sink there,
// and the client reports each write that left an object at a
// resourceVersion. It is how a controller knows which watch events are of
// its own reconciles' writes without the client and the controller
// importing each other.
package ownwrite

import "context"

// Sink receives the writes made with a context: namespace/name was left at
// resourceVersion. It is called on the writer's goroutine, so it must be
// safe for concurrent use.
type Sink interface {
	Wrote(namespace, name, resourceVersion string)
}

// Key is the context key of a context's Sink: ctx.Value(Key{}) returns the
// Sink, or nil. The controller's reconcile context answers it itself, so
// that a Reconcile call's context is one allocation.
type Key struct{}

// Unreported returns a copy of ctx whose writes are not reported: a write
// whose watch event must wake the reconcile again, as a step it leaves to
// its next pass.
func Unreported(ctx context.Context) context.Context {
	return context.WithValue(ctx, Key{}, nil)
}

// Report tells ctx's Sink, if any, that namespace/name was written at
// resourceVersion. A write with no resourceVersion is not reported.
func Report(ctx context.Context, namespace, name, resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	if s, ok := ctx.Value(Key{}).(Sink); ok {
		s.Wrote(namespace, name, resourceVersion)
	}
}
