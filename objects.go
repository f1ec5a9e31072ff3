package kloop

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/watcher"
)

// Handle is an App's typed handle on one kind: reads come from the App's
// informer cache and wait (bounded) until the cache holds the App's own
// earlier writes (read-your-writes); writes go to the API server through
// the App's client. Objects returns one.
//
// Objects read from a Handle are the cache's own: never modify them; write
// a copy (cache.Copy).
type Handle[T watcher.Object] struct {
	app    *App
	gvk    schema.GroupVersionKind
	gvr    schema.GroupVersionResource
	scope  informer.Scope
	inf    *informer.Informer[T]
	res    *client.Resource[T]
	reader *client.CachedReader[T]
	status statusSubresource
	writes statusWrites
	// statusByUpdate: the CRD's schema refuses an apply of the status.
	statusByUpdate atomic.Bool
	namespaced     bool
	gate           *kindgate.Gate // Options.WaitForKinds; nil for a kind that never waits
	err            error
}

// ObjectsOptions say how Objects and Unstructured find and watch a kind.
// The zero value asks discovery for the resource and watches all of it in
// Options.Namespace.
type ObjectsOptions struct {
	// Resource names the kind's resource instead of asking the API
	// server's discovery, for example
	// v1alpha1.SchemeGroupVersion.WithResource("foos"). The kind is then
	// taken to be namespaced unless ClusterScoped is set too. Unstructured
	// takes the resource as its argument and ignores this.
	Resource schema.GroupVersionResource
	// ClusterScoped says, with Resource, that the kind is cluster-scoped,
	// so it is watched whole whatever Options.Namespace says.
	ClusterScoped bool
	// Namespace, if not nil, is where a namespaced kind is watched ("" for
	// every namespace) instead of Options.Namespace: for a program whose
	// objects' namespace comes from elsewhere, such as a config file. It
	// has no effect on a cluster-scoped kind.
	Namespace *string
	// LabelSelector and FieldSelector narrow what the informer watches
	// (sent to the API server as they are).
	LabelSelector, FieldSelector string
	// Kind is the kind of Objects[*unstructured.Unstructured], for a kind
	// known only at run time: the handle reads and writes it as
	// unstructured content, and the scheme need not know it.
	Kind schema.GroupVersionKind
}

// objectsOptions returns the one ObjectsOptions of a call, or an error
// for more than one.
func objectsOptions(opts []ObjectsOptions) (ObjectsOptions, error) {
	switch len(opts) {
	case 0:
		return ObjectsOptions{}, nil
	case 1:
		return opts[0], nil
	}
	return ObjectsOptions{}, fmt.Errorf("give at most one ObjectsOptions, got %d: merge them into one", len(opts))
}

func (o *ObjectsOptions) scope() informer.Scope {
	return informer.Scope{LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector}
}

func (o *ObjectsOptions) namespaceOr(def string) string {
	if o.Namespace != nil {
		return *o.Namespace
	}
	return def
}

// Objects returns the App's handle on the kind of T, which the App's scheme
// must register. Its resource is found through the API server's discovery
// (cached: one request per API group) unless ObjectsOptions.Resource names
// it; its informer is the App's shared one for that resource, namespace
// and selectors, started by Run. Objects makes no request with Resource.
//
// A failure (T not in the scheme, a kind the server does not serve) is
// recorded in the App and returned by Run; the handle's methods return it
// too. With Options.WaitForKinds a custom kind the server does not serve is
// no failure: the handle's cache stays empty, and reads answer empty,
// until the kind is served.
//
// T may be *unstructured.Unstructured for a kind known only at run time,
// named by ObjectsOptions.Kind: the handle has every read and write of a
// typed one (Apply as a Patch of types.ApplyPatchType with the object's
// JSON), and a kind declared while the App runs is discovered (discovery
// is asked again for a kind it did not know) and its informer started at
// once:
//
//	gizmos := kloop.Objects[*unstructured.Unstructured](app, kloop.ObjectsOptions{Kind: gvk})
//
// Objects always makes an informer (and its cache), even for a kind the
// program only writes; client.NewResource[T](app.Client(), gvr) writes
// through the App's client without one.
func Objects[T interface {
	*E
	watcher.Object
}, E any](app *App, opts ...ObjectsOptions) *Handle[T] {
	h := &Handle[T]{app: app}
	err := h.resolve(T(new(E)), opts)
	if err == nil && h.namespaced && app.shardsBy(sharding.ByNamespace) {
		app.shardObjects(h.gvr, h.scope)
	}
	if err == nil {
		h.inf, err = informer.OfResource[T](app.Factory(), h.gvr, h.scope)
	}
	if err == nil {
		h.res, err = client.NewResource[T](app.client, h.gvr)
	}
	if err != nil {
		h.err = fmt.Errorf("kloop.Objects[%T]: %w", T(nil), err)
		app.fail(h.err)
		return h
	}
	h.reader = h.res.Cached(h.inf.Lister(), client.ReaderOptions{Logger: app.log})
	return h
}

// WithTransform sets the transform of the handle's informer (see
// informer.Informer.SetTransform) and returns h, to follow Objects:
//
//	kloop.Objects[*appsv1.Deployment](app).WithTransform(LeanDeployment)
//
// fn gets each object before the cache keeps it and may drop in place what
// the program never reads, so that the cache holds less, or add fields (a
// computed label). Every read of the informer sees what fn returned: Get,
// List, ByIndex, index functions, handlers, predicates given to Where and
// MapTo functions; the handle's writes and Resource() do not. Call it before
// Run; the informer is shared, so only one handle on it may set a
// transform. A failure is recorded like Objects' own.
func (h *Handle[T]) WithTransform(fn func(T) T) *Handle[T] {
	if h.err != nil {
		return h
	}
	if err := h.inf.SetTransform(fn); err != nil {
		h.err = fmt.Errorf("kloop.Objects[%T].WithTransform: %w", *new(T), err)
		h.app.fail(h.err)
	}
	return h
}

// resolve finds the handle's kind, resource and scope.
func (h *Handle[T]) resolve(sample T, opts []ObjectsOptions) error {
	cfg, err := objectsOptions(opts)
	if err != nil {
		return err
	}
	a := h.app
	var obj runtime.Object = sample
	kinds, _, err := a.opts.Scheme.ObjectKinds(obj)
	if _, ok := obj.(*unstructured.Unstructured); ok {
		if cfg.Kind.Kind == "" || cfg.Kind.Version == "" {
			return errors.New("give the kind of unstructured objects: kloop.ObjectsOptions{Kind: schema.GroupVersionKind{...}}")
		}
		kinds, err = []schema.GroupVersionKind{cfg.Kind}, nil
	}
	if err != nil || len(kinds) == 0 {
		return fmt.Errorf("the App's scheme does not register %T: add its API package's AddToScheme to Options.Scheme (%v)", sample, err)
	}
	h.gvk = kinds[0]
	for _, k := range kinds {
		if !cfg.Resource.Empty() && k.GroupVersion() == cfg.Resource.GroupVersion() {
			h.gvk = k
		}
	}
	namespaced := !cfg.ClusterScoped
	if cfg.Resource.Empty() {
		a.mu.Lock()
		gvr, ns, err := a.resourceOfLocked(h.gvk)
		a.mu.Unlock()
		served := err == nil
		if meta.IsNoMatchError(err) && a.opts.WaitForKinds && !builtIn(h.gvk) {
			// Waited for under the resource its kind guesses; the gate
			// says so if the CRD names another.
			gvr, _ = meta.UnsafeGuessKindToResource(h.gvk)
			ns, err = namespaced, nil
		}
		if err != nil {
			if meta.IsNoMatchError(err) {
				return fmt.Errorf("the API server serves no resource of kind %s: install its CRD, or name the resource with kloop.ObjectsOptions.Resource (%w)", h.gvk, err)
			}
			return fmt.Errorf("discover the resource of %s: %w", h.gvk, err)
		}
		h.gvr, namespaced = gvr, ns
		h.gate = a.kindGate(h.gvk, h.gvr, namespaced, served)
	} else {
		h.gvr = cfg.Resource
		// Not asked: open until a list or watch finds it not served.
		h.gate = a.kindGate(h.gvk, h.gvr, namespaced, true)
	}
	h.scope = cfg.scope()
	h.namespaced = namespaced
	if namespaced {
		h.scope.Namespace = cfg.namespaceOr(a.watchNS)
	}
	return nil
}

// Err is the error Objects met, or nil.
func (h *Handle[T]) Err() error { return h.err }

// GVR is the handle's resource.
func (h *Handle[T]) GVR() schema.GroupVersionResource { return h.gvr }

// Informer is the handle's shared informer, for handlers and indexes of
// your own. Nil if Objects failed. Its Lister reads the cache directly,
// without waiting for this App's writes (see Get): the escape hatch for
// code that must not block, such as a MapTo function; its ByIndex takes,
// for a namespaced kind, the value as IndexValue scopes it (see AddIndex).
func (h *Handle[T]) Informer() *informer.Informer[T] { return h.inf }

// Resource is the handle's client for T, for reads that must come from the
// API server rather than the cache. Nil if Objects failed.
func (h *Handle[T]) Resource() *client.Resource[T] { return h.res }

// Get returns the object from the cache, after waiting (bounded) until the
// cache has synced and holds this App's earlier writes of it. A missing
// object is a NotFound error (apierrors.IsNotFound). A cache that cannot
// sync is an error that names the informer and why (see readable), never
// a NotFound.
func (h *Handle[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	if err := h.readable(ctx); err != nil {
		var zero T
		return zero, err
	}
	return h.reader.Get(ctx, namespace, name)
}

// List returns the cached objects in namespace ("" for all) that match
// selector (nil for all), after waiting until the cache has synced and
// holds this App's earlier writes in that namespace. A cache that cannot
// sync is an error, never an empty list; but a kind that Options.WaitForKinds
// waits for lists empty until it is served.
func (h *Handle[T]) List(ctx context.Context, namespace string, selector labels.Selector) ([]T, error) {
	if err := h.readable(ctx); err != nil {
		return nil, err
	}
	return h.reader.List(ctx, namespace, selector)
}

// ReadSyncTimeout bounds how long a read of a Handle (Get, List, ByIndex,
// ListControlledBy) waits for the first sync of the handle's informer when
// the read's own context allows longer: the controllers' default
// SyncTimeout.
const ReadSyncTimeout = controller.DefaultSyncTimeout

// readable returns once the handle can answer reads: it was made without
// error and its informer has synced (a read before that would find an
// empty cache and call it the truth). It waits at most ReadSyncTimeout,
// and fails at once when the API server refuses the informer (403); the
// error is an *informer.SyncError naming the informer and its last
// list/watch error, except for a resource the server does not serve
// (404), whose error is not wrapped, so that apierrors.IsNotFound, which
// a reconcile reads as "the object is gone", is false for it. A synced
// informer costs one channel check.
func (h *Handle[T]) readable(ctx context.Context) error {
	if h.err != nil {
		return h.err
	}
	select {
	case <-h.inf.Synced():
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, ReadSyncTimeout)
	defer cancel()
	err := h.inf.WaitForSync(ctx)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		// The resource is not served (a CRD not installed, or deleted).
		// Not wrapped: a caller must not take it for a missing object.
		return fmt.Errorf("kloop: read of %s: its cache has not synced: the API server does not serve %s: %v", h.gvk.Kind, h.gvr, err)
	}
	return fmt.Errorf("kloop: read of %s: its cache has not synced: %w", h.gvk.Kind, err)
}

// Create creates obj on the API server and returns what the server stored.
func (h *Handle[T]) Create(ctx context.Context, obj T) (T, error) {
	if h.err != nil {
		return obj, h.err
	}
	return h.res.Create(ctx, obj)
}

// Update replaces obj on the API server (optimistic concurrency on its
// resourceVersion). With a status subresource the status is ignored: use
// UpdateStatus.
func (h *Handle[T]) Update(ctx context.Context, obj T) (T, error) {
	if h.err != nil {
		return obj, h.err
	}
	return h.res.Update(ctx, obj)
}

// UpdateStatus replaces obj's status through the status subresource.
func (h *Handle[T]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	if h.err != nil {
		return obj, h.err
	}
	return h.res.UpdateStatus(ctx, obj)
}

// Apply applies cfg, a server-side apply configuration, and returns the
// typed object the server stored (see client.Resource.Apply): the App's
// name is the field manager, which owns exactly the fields cfg sets;
// opts.Force takes fields other managers own, opts.Subresource "status"
// applies the status. Build cfg with client-go's apply configurations for
// built-in kinds and with controller-gen's (make generate) for your own:
//
//	dep, err := deployments.Apply(ctx, appsv1ac.Deployment(name, ns).
//		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(0)), client.PatchOptions{Force: true})
//
// Like every write, a later read of the handle waits for it.
func (h *Handle[T]) Apply(ctx context.Context, cfg runtime.ApplyConfiguration, opts client.PatchOptions) (T, error) {
	if h.err != nil {
		var zero T
		return zero, h.err
	}
	return h.res.Apply(ctx, cfg, opts)
}

// Patch patches the named object with data of patch type pt.
func (h *Handle[T]) Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts client.PatchOptions) (T, error) {
	if h.err != nil {
		var zero T
		return zero, h.err
	}
	return h.res.Patch(ctx, namespace, name, pt, data, opts)
}

// Delete deletes the named object.
func (h *Handle[T]) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if h.err != nil {
		return h.err
	}
	return h.res.Delete(ctx, namespace, name, opts)
}

// Where returns the handle's events filtered by predicates, to give to a
// controller's For or Owns:
//
//	kloop.NewController(app, "foo", r.Reconcile).For(foos.Where(controller.GenerationChanged[*v1alpha1.Foo]))
func (h *Handle[T]) Where(preds ...controller.Predicate[T]) Watched {
	return watched[T]{h: h, preds: preds}
}

// Watched is what a controller's For and Owns take: a *Handle, or a
// Handle's Where.
type Watched interface {
	handle() handleInfo
	forSource() controller.Source[cache.Key]
	ownsSource(owner schema.GroupKind) controller.Source[cache.Key]
}

type handleInfo struct {
	gvk  schema.GroupVersionKind
	err  error
	gate *kindgate.Gate // see Options.WaitForKinds
	// shard marks the kind sharded by UID; uid finds an object's UID by
	// key in the cache (for a sharded controller's For kind).
	shard func()
	uid   func(cache.Key) (string, bool)
	keys  func() []cache.Key
	// obj finds an object by key in the cache (a failed reconcile's event
	// is about it).
	obj func(cache.Key) (watcher.Object, bool)
}

func (h *Handle[T]) handle() handleInfo {
	return handleInfo{
		gvk:   h.gvk,
		err:   h.err,
		gate:  h.gate,
		shard: func() { h.app.shardObjects(h.gvr, h.scope) },
		uid: func(k cache.Key) (string, bool) {
			obj, ok := h.inf.Lister().Get(k.Namespace, k.Name)
			if !ok {
				return "", false
			}
			return string(obj.GetUID()), true
		},
		obj: func(k cache.Key) (watcher.Object, bool) {
			return h.inf.Lister().Get(k.Namespace, k.Name)
		},
		keys: func() []cache.Key {
			objs := h.inf.Lister().List(nil)
			keys := make([]cache.Key, len(objs))
			for i, o := range objs {
				keys[i] = cache.KeyOf(o)
			}
			return keys
		},
	}
}
func (h *Handle[T]) forSource() controller.Source[cache.Key] {
	return controller.For[T](h.inf)
}
func (h *Handle[T]) ownsSource(owner schema.GroupKind) controller.Source[cache.Key] {
	return controller.Owns[T](h.inf, owner)
}

type watched[T watcher.Object] struct {
	h     *Handle[T]
	preds []controller.Predicate[T]
}

func (w watched[T]) handle() handleInfo { return w.h.handle() }
func (w watched[T]) forSource() controller.Source[cache.Key] {
	return controller.For[T](w.h.inf, w.preds...)
}
func (w watched[T]) ownsSource(owner schema.GroupKind) controller.Source[cache.Key] {
	return controller.Owns[T](w.h.inf, owner, w.preds...)
}

// MapTo is a source for a controller's Watches: each change of h's objects
// that passes preds enqueues the keys mapKeys returns for the object (for
// an update, for its new state). mapKeys must be quick and must not block.
func MapTo[T watcher.Object, K comparable](h *Handle[T], mapKeys func(obj T) []K, preds ...controller.Predicate[T]) controller.Source[K] {
	if h.err != nil {
		return errSource[K]{h.err}
	}
	return controller.Watches(h.inf, mapKeys, preds...)
}

// errSource is the source of a handle that failed: it fails the
// controller's declaration (Err) and Watch with the handle's error.
type errSource[K comparable] struct{ err error }

func (s errSource[K]) Err() error { return s.err }

func (s errSource[K]) Register(string, controller.Queue[K]) (controller.Subscription, error) {
	return nil, s.err
}

// Unavailable returns a handle on nothing whose every read and write
// fails with err, and whose Informer and Resource are nil: what stands for
// a handle in a place that cannot be reached, such as a fleet's cluster
// that is not joined (see package fleet).
func Unavailable[T watcher.Object](err error) *Handle[T] {
	return &Handle[T]{err: err}
}
