// Package watchtest provides a scripted watcher.ListerWatcher for unit tests of
// code that runs a watcher.Reflector (informers, caches): the test decides what
// every List and Watch call returns, and in which order, and sees the options
// of every call.
//
// It does not imitate an API server (no resourceVersion bookkeeping, no
// selectors); for that, test against a real one (package testenv).
package watchtest

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/kloop-dev/kloop/watcher"
)

// Method names a ListerWatcher method in a Call.
type Method string

const (
	List  Method = "List"
	Watch Method = "Watch"
)

// Call is one call the reflector made.
type Call struct {
	Method  Method
	Options metav1.ListOptions
}

func (c Call) String() string {
	o := c.Options
	s := fmt.Sprintf("%s rv=%q", c.Method, o.ResourceVersion)
	if o.Limit != 0 {
		s += fmt.Sprintf(" limit=%d", o.Limit)
	}
	if o.Continue != "" {
		s += fmt.Sprintf(" continue=%q", o.Continue)
	}
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		s += " sendInitialEvents"
	}
	return s
}

type listResponse[T watcher.Object] struct {
	page watcher.ListPage[T]
	err  error
}

type watchResponse struct {
	w   apiwatch.Interface
	err error
}

// ListerWatcher is a scripted watcher.ListerWatcher. Each List (Watch) call
// records a Call and returns the next response queued with PushList
// (PushWatch), waiting for one if none is queued, until its ctx is done.
// Up to 1024 calls and 1024 responses of each kind can be pending.
type ListerWatcher[T watcher.Object] struct {
	calls   chan Call
	lists   chan listResponse[T]
	watches chan watchResponse

	mu  sync.Mutex
	all []Call
}

// New returns an empty script. Create it inside the synctest bubble when the
// test uses testing/synctest, so that blocked calls count as durably blocked.
func New[T watcher.Object]() *ListerWatcher[T] {
	return &ListerWatcher[T]{
		calls:   make(chan Call, 1024),
		lists:   make(chan listResponse[T], 1024),
		watches: make(chan watchResponse, 1024),
	}
}

var _ watcher.ListerWatcher[*metav1.PartialObjectMetadata] = (*ListerWatcher[*metav1.PartialObjectMetadata])(nil)

// List implements watcher.ListerWatcher.
func (f *ListerWatcher[T]) List(ctx context.Context, opts metav1.ListOptions) (watcher.ListPage[T], error) {
	f.record(Call{Method: List, Options: opts})
	select {
	case <-ctx.Done():
		return watcher.ListPage[T]{}, ctx.Err()
	case r := <-f.lists:
		return r.page, r.err
	}
}

// Watch implements watcher.ListerWatcher.
func (f *ListerWatcher[T]) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	f.record(Call{Method: Watch, Options: opts})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-f.watches:
		return r.w, r.err
	}
}

func (f *ListerWatcher[T]) record(c Call) {
	f.mu.Lock()
	f.all = append(f.all, c)
	f.mu.Unlock()
	f.calls <- c
}

// PushList queues the response of a List call: a page, or an error.
func (f *ListerWatcher[T]) PushList(page watcher.ListPage[T], err error) {
	f.lists <- listResponse[T]{page: page, err: err}
}

// PushWatch queues a successful Watch response and returns its watcher,
// which the test feeds with Add, Modify, Delete, Action (for bookmarks) and
// Error, and ends with Stop (as a server closing the stream). It buffers up
// to 100 events.
func (f *ListerWatcher[T]) PushWatch() *apiwatch.RaceFreeFakeWatcher {
	w := apiwatch.NewRaceFreeFake()
	f.watches <- watchResponse{w: w}
	return w
}

// PushWatchError queues a failed Watch response.
func (f *ListerWatcher[T]) PushWatchError(err error) {
	f.watches <- watchResponse{err: err}
}

// NextCall waits for the next call not yet taken, until ctx is done.
func (f *ListerWatcher[T]) NextCall(ctx context.Context) (Call, error) {
	select {
	case c := <-f.calls:
		return c, nil
	case <-ctx.Done():
		return Call{}, fmt.Errorf("watchtest: no List or Watch call: %w", ctx.Err())
	}
}

// Calls returns every call made so far, in order.
func (f *ListerWatcher[T]) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.all...)
}
