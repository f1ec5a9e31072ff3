package watcher

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// Funcs adapts two functions to ListerWatcher, for the tests. Both must be set. The ownership rules of
// ListerWatcher apply.
type Funcs[T Object] struct {
	ListFunc  func(ctx context.Context, opts metav1.ListOptions) (ListPage[T], error)
	WatchFunc func(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error)
}

// List calls ListFunc.
func (f Funcs[T]) List(ctx context.Context, opts metav1.ListOptions) (ListPage[T], error) {
	return f.ListFunc(ctx, opts)
}

// Watch calls WatchFunc.
func (f Funcs[T]) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	return f.WatchFunc(ctx, opts)
}

// OpError and its Op values, for the tests that check which call failed.
type OpError = opError

const (
	OpList      = opList
	OpWatchList = opWatchList
	OpWatch     = opWatch
)
