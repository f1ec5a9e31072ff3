package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/rvorder"
	"github.com/kloop-dev/kloop/watcher"
)

// DefaultMaxWait bounds how long a CachedReader waits for its cache to catch
// up with a write, when ReaderOptions.MaxWait is zero.
const DefaultMaxWait = 10 * time.Second

// ErrCacheStale is matched (errors.Is) by the error a CachedReader returns
// when its cache did not reach the client's own write within MaxWait. The
// error's message says which write, the cache's resourceVersion and how
// long the read waited.
var ErrCacheStale = errors.New("client: cache has not caught up with this client's write")

// staleError says which write a cache did not reach in time.
type staleError struct {
	Resource schema.GroupResource
	// Key is the object whose write the cache had not seen.
	Key cache.Key
	// Want describes the write ("resourceVersion N", or "deletion of uid U");
	// Have is the cache's resourceVersion when the wait ended.
	Want, Have string
	Waited     time.Duration
}

func (e *staleError) Error() string {
	return fmt.Sprintf("client: cache of %s did not reach this client's write of %s (%s) within %v (cache is at %q)",
		e.Resource, e.Key, e.Want, e.Waited, e.Have)
}

// Is makes errors.Is(err, ErrCacheStale) true.
func (e *staleError) Is(target error) bool { return target == ErrCacheStale }

// readCache is what a CachedReader needs of a cache: reads, the resourceVersion
// it has caught up with, and a channel closed at its next change.
// cache.Lister (a *cache.Store) provides it.
type readCache[T watcher.Object] interface {
	Get(namespace, name string) (T, bool)
	ListInNamespace(namespace string, selector labels.Selector) []T
	ResourceVersion() string
	// Changed returns a channel closed the next time the cache applies
	// anything (cache.Lister.Changed). A CachedReader takes it before each
	// check of a write, so a change between the check and the wait is not
	// missed.
	Changed() <-chan struct{}
}

// ReaderOptions configure a CachedReader. The zero value works.
type ReaderOptions struct {
	// MaxWait bounds each wait for the cache. Default DefaultMaxWait.
	MaxWait time.Duration
	// Logger receives a debug line per wait. Default: slog.Default().
	Logger *slog.Logger
}

// CachedReader reads one resource from a cache, but first waits until the
// cache has seen the writes its client made: a Get of a key the client wrote
// at resourceVersion N waits until the cache holds that key at N or later (or
// the cache as a whole has passed N); after a delete the server confirmed
// without returning the object, it waits until the cache no longer holds the
// deleted object; a List waits for every pending write in the namespace. Each wait is bounded by MaxWait and
// ends with an error that is ErrCacheStale (errors.Is) rather than stale data.
// Keys the client has not written are read without waiting.
//
// Objects returned are the cache's: read-only, shared with every other
// reader. Use cache.Copy before modifying one. It is safe for concurrent use.
type CachedReader[T watcher.Object] struct {
	cache   readCache[T]
	tracker *writeTracker
	gr      schema.GroupResource
	maxWait time.Duration
	log     *slog.Logger
}

// newCachedReader returns a reader of the cache c of resource gr that waits
// for the writes recorded in tracker (nil: never waits); Resource.Cached
// makes one for a Resource's own client.
func newCachedReader[T watcher.Object](c readCache[T], tracker *writeTracker, gr schema.GroupResource, opts ReaderOptions) *CachedReader[T] {
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &CachedReader[T]{cache: c, tracker: tracker, gr: gr, maxWait: opts.MaxWait, log: opts.Logger}
}

// Cached returns a CachedReader of c, which must cache this Resource's
// objects, that waits for this client's writes.
func (r *Resource[T]) Cached(c cache.Lister[T], opts ReaderOptions) *CachedReader[T] {
	return newCachedReader(c, r.c.tracker, r.gvr.GroupResource(), opts)
}

// Get returns namespace/name from the cache once the cache has seen this
// client's latest write of it. A missing object is an apierrors NotFound
// error, as from the API server. The object is read-only.
func (r *CachedReader[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	var zero T
	key := cache.Key{Namespace: namespace, Name: name}
	r.seen()
	if w, ok := r.tracker.Pending(r.gr, key); ok {
		if err := r.wait(ctx, []pendingWrite{w}); err != nil {
			return zero, err
		}
	}
	obj, ok := r.cache.Get(namespace, name)
	if !ok {
		return zero, apierrors.NewNotFound(r.gr, name)
	}
	return obj, nil
}

// List returns the objects in namespace ("" means all) matching selector
// (nil matches everything), once the cache has seen every write this client
// made in that namespace. The objects are read-only.
func (r *CachedReader[T]) List(ctx context.Context, namespace string, selector labels.Selector) ([]T, error) {
	r.seen()
	if err := r.wait(ctx, r.tracker.PendingIn(r.gr, namespace)); err != nil {
		return nil, err
	}
	return r.cache.ListInNamespace(namespace, selector), nil
}

// WaitForWrites returns once the cache has seen every write this client
// made in namespace ("" means all), as List does before it reads: for a
// read of the cache that does not go through the reader, such as an index.
func (r *CachedReader[T]) WaitForWrites(ctx context.Context, namespace string) error {
	r.seen()
	return r.wait(ctx, r.tracker.PendingIn(r.gr, namespace))
}

// ListControlledBy returns the objects in namespace whose controller
// reference has the UID owner, once the cache has seen each write of this
// client that can change that answer: a write of an object controlled by
// owner, or of an unknown controller (Record), and any write of a key the
// cache holds controlled by owner. Writes of other owners' objects, which a
// List in the namespace would wait for, are not waited for. The objects
// are read-only.
func (r *CachedReader[T]) ListControlledBy(ctx context.Context, namespace string, owner types.UID) ([]T, error) {
	list := func() (out []T, names map[string]bool) {
		for _, obj := range r.cache.ListInNamespace(namespace, nil) {
			if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.UID == owner {
				out = append(out, obj)
				if names == nil {
					names = map[string]bool{}
				}
				names[obj.GetName()] = true
			}
		}
		return out, names
	}
	r.seen()
	out, held := list()
	ws := r.tracker.pendingWhere(r.gr, namespace, func(w pendingWrite) bool {
		return !w.Gone && (!w.ControllerKnown || w.Controller == owner) || held[w.Key.Name]
	})
	if len(ws) == 0 {
		return out, nil
	}
	if err := r.wait(ctx, ws); err != nil {
		return nil, err
	}
	out, _ = list()
	return out, nil
}

// seen drops the client's pending writes of the reader's resource that
// its cache has passed, of any key: a write whose watch event only woke a
// skipped reconcile is never read back by key, and would otherwise stay.
func (r *CachedReader[T]) seen() {
	r.tracker.Seen(r.gr, r.cache.ResourceVersion())
}

// wait blocks until the cache has seen every write in ws, for at most
// MaxWait in all, and clears each write it confirms.
//
// Each check takes the cache's Changed channel before it looks: a change
// applied between the look and the wait (a delete's event, say) closes the
// channel, and the write is looked at again. There is no resourceVersion to
// compute for a delete and so none to miss.
func (r *CachedReader[T]) wait(ctx context.Context, ws []pendingWrite) error {
	var (
		began time.Time
		wctx  context.Context
	)
	for _, w := range ws {
		for {
			changed := r.cache.Changed()
			if r.reached(w) {
				break
			}
			if wctx == nil {
				began = time.Now()
				var cancel context.CancelFunc
				wctx, cancel = context.WithTimeoutCause(ctx, r.maxWait, errMaxWait)
				defer cancel()
			}
			select {
			case <-changed:
			case <-wctx.Done():
				err := context.Cause(wctx)
				if errors.Is(err, errMaxWait) {
					return &staleError{Resource: r.gr, Key: w.Key, Want: w.want(), Have: r.cache.ResourceVersion(), Waited: time.Since(began)}
				}
				return fmt.Errorf("client: waiting for the cache of %s to reach %s at %s (cache is at %q): %w",
					r.gr, w.Key, w.want(), r.cache.ResourceVersion(), err)
			}
		}
		if wctx != nil {
			r.log.Debug("cache caught up with own write", "resource", r.gr.String(), "namespace", w.Key.Namespace, "name", w.Key.Name,
				"rv", w.ResourceVersion, "gone", w.Gone, "waited", time.Since(began))
		}
		r.tracker.Forget(r.gr, w)
	}
	return nil
}

// reached reports whether the cache has seen w.
func (r *CachedReader[T]) reached(w pendingWrite) bool {
	obj, ok := r.cache.Get(w.Key.Namespace, w.Key.Name)
	if w.Gone {
		return !ok || (w.UID != "" && obj.GetUID() != w.UID)
	}
	return rvorder.AtOrAfter(r.cache.ResourceVersion(), w.ResourceVersion) || (ok && rvorder.AtOrAfter(obj.GetResourceVersion(), w.ResourceVersion))
}

func (w pendingWrite) want() string {
	if w.Gone {
		return "deletion of uid " + string(w.UID)
	}
	return "resourceVersion " + w.ResourceVersion
}

var errMaxWait = errors.New("client: MaxWait elapsed")
