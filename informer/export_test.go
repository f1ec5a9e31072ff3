package informer

import "github.com/kloop-dev/kloop/watcher"

// OfListerWatcher is ofListerWatcher: the factory's informer over a
// ListerWatcher of the test's own.
func OfListerWatcher[T watcher.Object](f *Factory, resource string, scope Scope, newLW func(watcher.Scope) (watcher.ListerWatcher[T], error)) (*Informer[T], error) {
	return ofListerWatcher(f, resource, scope, newLW)
}
