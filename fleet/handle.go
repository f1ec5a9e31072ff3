package fleet

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/watcher"
)

// Handle is a fleet's handle on one kind: in each joined cluster, a
// kloop.Handle of the cluster's App, made (kloop.Objects) as the cluster
// joins. Read and write through In(key.Cluster); give it to a fleet
// controller's For and Owns, and to MapTo.
type Handle[T watcher.Object] struct {
	f    *Fleet
	gvk  schema.GroupVersionKind
	err  error
	make func(*kloop.App) *kloop.Handle[T]
	// under f.mu: what to do to each cluster's handle (WithTransform,
	// AddIndex), and the handle in each member while it serves.
	each []func(*kloop.Handle[T]) error
	in   map[*member]*kloop.Handle[T]
}

// Objects declares the kind of T in every cluster of the fleet, before
// Run, as kloop.Objects does in one: with opts, in each cluster's App as
// it joins. It makes no request. A cluster that does not serve the kind
// fails to join (reported, and retried).
func Objects[T interface {
	*E
	watcher.Object
}, E any](f *Fleet, opts ...kloop.ObjectsOptions) *Handle[T] {
	h := &Handle[T]{f: f, in: map[*member]*kloop.Handle[T]{}, make: func(a *kloop.App) *kloop.Handle[T] { return kloop.Objects[T](a, opts...) }}
	if err := h.resolve(T(new(E)), opts); err != nil {
		h.err = fmt.Errorf("fleet.Objects[%T]: %w", T(nil), err)
		return h
	}
	if err := f.declare(h); err != nil {
		h.err = fmt.Errorf("fleet.Objects[%T]: %w", T(nil), err)
	}
	return h
}

// resolve finds the kind from the scheme (or ObjectsOptions.Kind), without
// a request: what Owns needs of the owner before any cluster joins.
func (h *Handle[T]) resolve(sample T, opts []kloop.ObjectsOptions) error {
	var o kloop.ObjectsOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return fmt.Errorf("give at most one ObjectsOptions, got %d: merge them into one", len(opts))
	}
	if o.Kind.Kind != "" {
		h.gvk = o.Kind
		return nil
	}
	kinds, _, err := h.f.app.Options().Scheme.ObjectKinds(sample)
	if err != nil || len(kinds) == 0 {
		return fmt.Errorf("the App's scheme does not register it: add its API package's AddToScheme to Options.Scheme (%v)", err)
	}
	h.gvk = kinds[0]
	for _, k := range kinds {
		if !o.Resource.Empty() && k.GroupVersion() == o.Resource.GroupVersion() {
			h.gvk = k
		}
	}
	return nil
}

// WithTransform sets the transform of the kind's informer in every
// cluster (see kloop.Handle.WithTransform) and returns h. Call it before
// Run.
func (h *Handle[T]) WithTransform(fn func(T) T) *Handle[T] {
	h.also(func(ch *kloop.Handle[T]) error { return ch.WithTransform(fn).Err() })
	return h
}

// AddIndex adds an index to the kind's cache in every cluster (see
// kloop.Handle.AddIndex), for In(cluster).ByIndex; add it before Run. It
// returns the mistakes it can see at once; an index that a cluster's
// cache refuses fails that cluster's join, which reports it.
func (h *Handle[T]) AddIndex(name string, fn cache.IndexFunc[T]) error {
	if fn == nil {
		return fmt.Errorf("fleet: AddIndex %q on %s: the index function is nil", name, h.gvk.Kind)
	}
	if h.err != nil {
		return h.err
	}
	h.also(func(ch *kloop.Handle[T]) error { return ch.AddIndex(name, fn) })
	return nil
}

// also adds what to do to each cluster's handle as it is made.
func (h *Handle[T]) also(do func(*kloop.Handle[T]) error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.each = append(h.each, do)
}

// add makes the handle in a member's App, before the App runs.
func (h *Handle[T]) add(m *member) error {
	ch := h.make(m.app)
	h.f.mu.Lock()
	each := h.each
	h.f.mu.Unlock()
	for _, do := range each {
		if err := do(ch); err != nil {
			return err
		}
	}
	if err := ch.Err(); err != nil {
		return err
	}
	h.f.mu.Lock()
	h.in[m] = ch
	h.f.mu.Unlock()
	return nil
}

func (h *Handle[T]) drop(m *member) {
	h.f.mu.Lock()
	delete(h.in, m)
	h.f.mu.Unlock()
}

// In returns the handle on the kind in the cluster named cluster (a Key's
// Cluster) while it is joined: a plain kloop.Handle of the cluster's App.
// Otherwise it returns a handle whose every read and write fails, saying
// why (see kloop.Unavailable).
func (h *Handle[T]) In(cluster string) *kloop.Handle[T] {
	if h.err != nil {
		return kloop.Unavailable[T](h.err)
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if m := h.f.joinedLocked(cluster); m != nil {
		return h.in[m]
	}
	return kloop.Unavailable[T](fmt.Errorf("fleet: %s handle: cluster %q is not joined to the fleet", h.gvk.Kind, cluster))
}

// Watched is what a fleet controller's For and Owns take: a *Handle.
type Watched interface {
	fleet() *Fleet
	kind() schema.GroupVersionKind
	failed() error
	// source is the handle's source in a member (fleet.mu held): For's,
	// or Owns' of owner when owner is not nil.
	source(m *member, owner *schema.GroupKind) (controller.Source[cache.Key], error)
	keys() []Key
}

func (h *Handle[T]) fleet() *Fleet                 { return h.f }
func (h *Handle[T]) kind() schema.GroupVersionKind { return h.gvk }
func (h *Handle[T]) failed() error                 { return h.err }

func (h *Handle[T]) source(m *member, owner *schema.GroupKind) (controller.Source[cache.Key], error) {
	ch := h.in[m]
	if ch == nil {
		return nil, errors.New("no handle in the cluster")
	}
	if owner != nil {
		return controller.Owns[T](ch.Informer(), *owner), nil
	}
	return controller.For[T](ch.Informer()), nil
}

// keys lists the cached keys of every joined cluster.
func (h *Handle[T]) keys() []Key {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	var out []Key
	for m, ch := range h.in {
		if !m.joined {
			continue
		}
		for _, o := range ch.Informer().Lister().List(nil) {
			out = append(out, Key{m.name, cache.KeyOf(o)})
		}
	}
	return out
}

// MapTo is a source for a fleet controller's Watches: in every cluster,
// each change of h's objects that passes preds enqueues the keys mapKeys
// returns for the object (see kloop.MapTo); a key whose Cluster is "" is
// the object's own cluster.
func MapTo[T watcher.Object](h *Handle[T], mapKeys func(obj T) []Key, preds ...controller.Predicate[T]) controller.Source[Key] {
	if h.err != nil {
		return failed{h.err}
	}
	return source{f: h.f, name: "Watches", in: func(m *member) (controller.Source[Key], error) {
		ch := h.in[m]
		if ch == nil {
			return nil, errors.New("no handle in the cluster")
		}
		fill := func(k Key) Key {
			if k.Cluster == "" {
				k.Cluster = m.name
			}
			return k
		}
		return controller.Map(controller.Watches(ch.Informer(), mapKeys, preds...), fill), nil
	}}
}
