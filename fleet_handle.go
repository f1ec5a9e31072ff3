package kloop

import (
	"context"
	"errors"
	"fmt"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/watcher"
)

// NewFleetController starts the declaration of a controller over every
// cluster of the App's fleet (Options.Fleet): For, Owns and Watches work in
// each cluster as they do in one, and reconcile gets the key of the object
// with its cluster's name. Reach the cluster through the handles' In and
// App.Cluster:
//
//	foos := kloop.Objects[*v1alpha1.Foo](app)
//	kloop.NewFleetController(app, "foo", func(ctx context.Context, k kloop.ClusterKey) (controller.Result, error) {
//		foo, err := foos.In(k.Cluster).Get(ctx, k.Namespace, k.Name)
//		...
//	}).For(foos).Owns(deployments).Complete()
//
// A key of a cluster that is not joined (it left, or is joining again) is
// dropped without a call: its keys are enqueued again when it joins.
func NewFleetController(app *App, name string, reconcile func(ctx context.Context, key ClusterKey) (controller.Result, error)) *FleetControllerBuilder {
	call := reconcile
	if f := app.fleet; f != nil && reconcile != nil {
		call = func(ctx context.Context, key ClusterKey) (controller.Result, error) {
			if f.joined(key.Cluster) == nil {
				return controller.Result{}, nil
			}
			return reconcile(ctx, key)
		}
	}
	b := NewKeyedController(app, name, call)
	if app.fleet == nil {
		b.b.errs = append(b.b.errs, errors.New("NewFleetController needs an App with Options.Fleet; for one cluster, use NewController"))
	}
	return &FleetControllerBuilder{b}
}

// FleetControllerBuilder declares a controller over a fleet of clusters
// (NewFleetController): a KeyedControllerBuilder of ClusterKey with For
// and Owns, which only a fleet controller has. Give For and Owns first:
// Watches, Workers and WithOptions return the keyed builder.
type FleetControllerBuilder struct {
	*KeyedControllerBuilder[ClusterKey]
}

// For, in a fleet controller (NewFleetController), reconciles the watched
// kind's objects themselves in every cluster: each change enqueues the
// object's ClusterKey. It takes a handle of the fleet App (or its Where),
// and a controller has one For.
func (b *FleetControllerBuilder) For(w Watched) *FleetControllerBuilder {
	b.fleetSource(w, false)
	return b
}

// Owns, in a fleet controller, reconciles the owners of the watched kind's
// objects, in the objects' own cluster, as ControllerBuilder.Owns does in
// one cluster. Give For first.
func (b *FleetControllerBuilder) Owns(w Watched) *FleetControllerBuilder {
	b.fleetSource(w, true)
	return b
}

func (b *KeyedControllerBuilder[K]) fleetSource(w Watched, owns bool) {
	what := "For"
	if owns {
		what = "Owns"
	}
	info := w.handle()
	fail := func(err error) { b.b.errs = append(b.b.errs, fmt.Errorf("%s(%s): %w", what, info.gvk.Kind, err)) }
	f := w.fleetOf()
	if _, fleetKeys := any(b).(*KeyedControllerBuilder[ClusterKey]); f == nil || f != b.b.app.fleet || !fleetKeys {
		if f == nil && info.err != nil {
			fail(info.err)
			return
		}
		fail(errors.New("For and Owns of a keyed controller take handles of an App with Options.Fleet, in a controller from NewFleetController; for one cluster, use NewController"))
		return
	}
	gk := info.gvk.GroupKind()
	switch {
	case !owns && b.owner != nil:
		fail(errors.New("For given twice: a controller has one primary kind; use Watches for others"))
		return
	case !owns:
		b.owner, b.forW = &gk, w
	case b.owner == nil:
		fail(errors.New("Owns before For: give For first, Owns maps objects to owners of the For kind"))
		return
	}
	owner := *b.owner
	src := fleetSource{f: f, register: func(cluster string, handles []any, name string, q controller.Queue[ClusterKey]) (controller.Subscription, error) {
		cw := w.in(handles)
		if err := cw.handle().err; err != nil {
			return nil, err
		}
		s := cw.forSource()
		if owns {
			s = cw.ownsSource(owner)
		}
		return s.Register(name, clusterQueue{cluster, q})
	}}
	b.b.sources = append(b.b.sources, any(src).(controller.Source[K]))
}

// fleetSource is a controller source over every cluster of a fleet.
type fleetSource struct {
	f        *fleet
	register registerFunc
}

func (s fleetSource) Register(name string, q controller.Queue[ClusterKey]) (controller.Subscription, error) {
	return s.f.subscribe(name, q, s.register), nil
}

// fleetMap is MapTo of a fleet handle: controller.Watches in each cluster.
type fleetMap[T watcher.Object, K comparable] struct {
	h       *Handle[T]
	mapKeys func(T) []K
	preds   []controller.Predicate[T]
}

func (s fleetMap[T, K]) Register(name string, q controller.Queue[K]) (controller.Subscription, error) {
	cq, ok := any(q).(controller.Queue[ClusterKey])
	if !ok {
		return nil, fmt.Errorf("MapTo of a fleet handle (%s) feeds a fleet controller (NewFleetController): map objects to kloop.ClusterKey keys (an empty Cluster is the object's own)", s.h.gvk.Kind)
	}
	return s.h.fleet.subscribe(name, cq, func(cluster string, handles []any, name string, q controller.Queue[ClusterKey]) (controller.Subscription, error) {
		ch := handles[s.h.decl].(*Handle[T])
		if ch.err != nil {
			return nil, ch.err
		}
		return controller.Watches(ch.inf, s.mapKeys, s.preds...).Register(name, any(fillQueue{cluster, q}).(controller.Queue[K]))
	}), nil
}

// fleetObjects is Objects in an App with a fleet: a handle on the kind in
// every cluster, made in each cluster's App as it joins.
func fleetObjects[T interface {
	*E
	watcher.Object
}, E any](app *App, opts []ObjectsOptions) *Handle[T] {
	h := &Handle[T]{app: app, fleet: app.fleet}
	cfg, err := objectsOptions(opts)
	if err != nil {
		h.err = fmt.Errorf("kloop.Objects[%T]: %w", T(nil), err)
		app.fail(h.err)
		return h
	}
	kinds, _, err := app.opts.Scheme.ObjectKinds(T(new(E)))
	if err != nil || len(kinds) == 0 {
		h.err = fmt.Errorf("kloop.Objects[%T]: the App's scheme does not register it: add its API package's AddToScheme to Options.Scheme (%v)", T(nil), err)
		app.fail(h.err)
		return h
	}
	h.gvk = kinds[0]
	for _, k := range kinds {
		if !cfg.Resource.Empty() && k.GroupVersion() == cfg.Resource.GroupVersion() {
			h.gvk = k
		}
	}
	h.gvr = cfg.Resource
	h.err = fmt.Errorf("kloop.Objects[%T] is a handle on every cluster of the fleet: read and write through its In(key.Cluster)", T(nil))
	app.mu.Lock()
	defer app.mu.Unlock()
	if app.started {
		app.errs = append(app.errs, fmt.Errorf("kloop.Objects[%T] after Run: a fleet App's kinds are declared before Run", T(nil)))
		return h
	}
	h.decl = len(app.fleet.decls)
	app.fleet.decls = append(app.fleet.decls, func(ca *App) (any, error) {
		ch := Objects[T](ca, opts...)
		for _, each := range h.each {
			each(ch)
		}
		return ch, ch.err
	})
	return h
}

// In returns the handle on the same kind in the fleet's cluster named
// cluster (a ClusterKey's Cluster) while it is joined; otherwise a handle
// whose methods return an error that says so. In an App without a fleet,
// In("") is h.
func (h *Handle[T]) In(cluster string) *Handle[T] {
	if h.fleet == nil {
		if cluster == "" {
			return h
		}
		return &Handle[T]{app: h.app, gvk: h.gvk, err: fmt.Errorf("kloop: %s handle: In(%q) in an App without a fleet (Options.Fleet)", h.gvk.Kind, cluster)}
	}
	if v, ok := h.fleet.handle(cluster, h.decl); ok {
		return v.(*Handle[T])
	}
	return &Handle[T]{app: h.app, gvk: h.gvk, err: fmt.Errorf("kloop: %s handle: cluster %q is not joined to the fleet", h.gvk.Kind, cluster)}
}

func (h *Handle[T]) fleetOf() *fleet { return h.fleet }

// inCluster is the handle in the cluster whose handles are given (by
// declaration).
func (h *Handle[T]) inCluster(handles []any) *Handle[T] { return handles[h.decl].(*Handle[T]) }
func (h *Handle[T]) in(handles []any) Watched           { return h.inCluster(handles) }

func (w watched[T]) fleetOf() *fleet { return w.h.fleet }
func (w watched[T]) in(handles []any) Watched {
	return watched[T]{h: w.h.inCluster(handles), preds: w.preds}
}
