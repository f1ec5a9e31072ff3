package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

// NewController starts the declaration of a controller over every cluster
// of the fleet: For, Owns and MapTo work in each cluster as
// kloop.ControllerBuilder's do in one, and reconcile gets the key of the
// object with its cluster's name. Reach the cluster through the handles'
// In and Fleet.Cluster:
//
//	foos := fleet.Objects[*v1alpha1.Foo](f)
//	fleet.NewController(f, "foo", func(ctx context.Context, k fleet.Key) (controller.Result, error) {
//		foo, err := foos.In(k.Cluster).Get(ctx, k.Namespace, k.Name)
//		...
//	}).For(foos).Owns(deployments).Complete()
//
// It is a kloop.KeyedControllerBuilder of Key with For and Owns: give them
// first, then Watches, Workers and WithOptions. A key of a cluster that is
// not joined (it left, or is joining again) is dropped without a call: its
// keys are enqueued again when it joins.
func NewController(f *Fleet, name string, reconcile func(ctx context.Context, key Key) (controller.Result, error)) *ControllerBuilder {
	call := reconcile
	if reconcile != nil {
		call = func(ctx context.Context, key Key) (controller.Result, error) {
			if f.Cluster(key.Cluster) == nil {
				return controller.Result{}, nil
			}
			return reconcile(ctx, key)
		}
	}
	return &ControllerBuilder{kloop.NewKeyedController(f.app, name, call), f, nil}
}

// ControllerBuilder declares a controller over a fleet (NewController).
type ControllerBuilder struct {
	*kloop.KeyedControllerBuilder[Key]
	f     *Fleet
	owner *schema.GroupKind // For's kind
}

// For reconciles the watched kind's objects themselves in every cluster:
// each change enqueues the object's Key. A controller has one For; in an
// App that shards, For's objects place the keys (the cluster and the
// namespace).
func (b *ControllerBuilder) For(w Watched) *ControllerBuilder {
	if b.check("For", w) {
		return b
	}
	if b.owner != nil {
		b.fail("For", w, errors.New("For given twice: a controller has one primary kind; use Watches for others"))
		return b
	}
	gk := w.kind().GroupKind()
	b.owner = &gk
	b.Watches(source{f: b.f, name: "For", in: func(m *member) (controller.Source[Key], error) {
		src, err := w.source(m, nil)
		if err != nil {
			return nil, err
		}
		return controller.Map(src, inCluster(m.name)), nil
	}})
	b.Sharded(func(k Key) (string, string, bool) { return k.Cluster, k.Namespace, true }, w.keys)
	return b
}

// Owns reconciles the owners of the watched kind's objects, in the
// objects' own cluster, as kloop.ControllerBuilder.Owns does in one
// cluster. Give For first.
func (b *ControllerBuilder) Owns(w Watched) *ControllerBuilder {
	if b.check("Owns", w) {
		return b
	}
	if b.owner == nil {
		b.fail("Owns", w, errors.New("Owns before For: give For first, Owns maps objects to owners of the For kind"))
		return b
	}
	owner := *b.owner
	b.Watches(source{f: b.f, name: "Owns", in: func(m *member) (controller.Source[Key], error) {
		src, err := w.source(m, &owner)
		if err != nil {
			return nil, err
		}
		return controller.Map(src, inCluster(m.name)), nil
	}})
	return b
}

// check fails the declaration, and reports true, for a handle that failed
// or is another fleet's.
func (b *ControllerBuilder) check(what string, w Watched) bool {
	switch {
	case w.failed() != nil:
		b.fail(what, w, w.failed())
	case w.fleet() != b.f:
		b.fail(what, w, errors.New("a handle of another fleet: give the handles of the controller's own (Objects of the same Fleet)"))
	default:
		return false
	}
	return true
}

func (b *ControllerBuilder) fail(what string, w Watched, err error) {
	b.Watches(failed{fmt.Errorf("%s(%s): %w", what, w.kind().Kind, err)})
}

func inCluster(cluster string) func(cache.Key) Key {
	return func(k cache.Key) Key { return Key{cluster, k} }
}

// failed is the source of a mistake: it fails the controller's
// declaration (see kloop.KeyedControllerBuilder.Watches).
type failed struct{ err error }

func (s failed) Err() error { return s.err }

func (s failed) Register(string, controller.Queue[Key]) (controller.Subscription, error) {
	return nil, s.err
}

// source is a controller source over every cluster of a fleet: in makes
// its source in one joined member (fleet.mu held, so it must not call In).
type source struct {
	f    *Fleet
	name string
	in   func(m *member) (controller.Source[Key], error)
}

// String names the source in causes.
func (s source) String() string { return s.name }

func (s source) Register(name string, q controller.Queue[Key]) (controller.Subscription, error) {
	return s.f.subscribe(name, q, s.in), nil
}

// subscribe adds a fleet source's subscription: in makes its source in one
// cluster, subscribed now for each joined one and later for each that
// joins.
func (f *Fleet) subscribe(name string, q controller.Queue[Key], in func(*member) (controller.Source[Key], error)) controller.Subscription {
	s := &subscription{f: f, name: name, q: q, in: in, done: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, s)
	for _, m := range f.members {
		if m.joined {
			f.attachLocked(m, s)
		}
	}
	return s
}

func (f *Fleet) attachLocked(m *member, s *subscription) {
	src, err := s.in(m)
	var sub controller.Subscription
	if err == nil {
		sub, err = src.Register(s.name+"@"+m.name, s.q)
	}
	if err != nil {
		f.app.Logger().Error("Fleet: a controller could not watch the cluster", "cluster", m.name, "source", s.name, "err", err)
		return
	}
	m.subs[s] = sub
}

// subscription is one controller source's subscription to the whole
// fleet.
type subscription struct {
	f    *Fleet
	name string
	q    controller.Queue[Key]
	in   func(*member) (controller.Source[Key], error)
	once sync.Once
	done chan struct{}
}

// WaitForSync returns at once: a cluster's keys are enqueued from the
// moment its caches have synced, and the fleet's own readiness says when
// the clusters have been tried.
func (s *subscription) WaitForSync(context.Context) error { return nil }

func (s *subscription) Remove() {
	s.once.Do(func() {
		f := s.f
		f.mu.Lock()
		f.subs = slices.DeleteFunc(f.subs, func(x *subscription) bool { return x == s })
		var subs []controller.Subscription
		for _, m := range f.members {
			if sub, ok := m.subs[s]; ok {
				delete(m.subs, s)
				sub.Remove()
				subs = append(subs, sub)
			}
		}
		f.mu.Unlock()
		go func() { // Remove does not wait; Done does
			for _, sub := range subs {
				<-sub.Done()
			}
			close(s.done)
		}()
	})
}

func (s *subscription) Done() <-chan struct{} { return s.done }
