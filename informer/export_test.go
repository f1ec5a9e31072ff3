package informer

import (
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// OfListerWatcher is ofListerWatcher: the factory's informer over a
// ListerWatcher of the test's own.
func OfListerWatcher[T watcher.Object](f *Factory, resource string, scope Scope, newLW func(watcher.Scope) (watcher.ListerWatcher[T], error)) (*Informer[T], error) {
	return ofListerWatcher(f, resource, scope, newLW)
}

// HandlerFunc adapts a function to a Handler, for the tests that see every
// event alike.
type HandlerFunc[T watcher.Object] func(e cache.Event[T])

// OnEvent implements Handler.
func (f HandlerFunc[T]) OnEvent(e cache.Event[T]) { f(e) }
