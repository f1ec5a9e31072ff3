package kloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/workqueue"
)

// ControllerBuilder declares one controller of an App, in one statement:
//
//	err := kloop.NewController(app, "foo-controller", r.Reconcile).
//		For(foos).Owns(deployments).Workers(2).Complete()
//
// For and Owns enqueue a cache.Key, so they need a controller whose key is
// cache.Key; Watches takes any controller.Source of the controller's key.
type ControllerBuilder[K comparable] struct {
	app       *App
	reconcile func(ctx context.Context, key K) (controller.Result, error)
	opts      controller.Options[K]
	owner     *schema.GroupKind
	forUID    func(cache.Key) (string, bool)
	forKeys   func() []cache.Key
	sources   []controller.Source[K]
	errs      []error
}

// NewController starts the declaration of a controller named name (its
// logs, metrics and queue carry the name; give each controller of a
// program its own) that calls reconcile for each key. Pass a method value
// (r.Reconcile) or a function; the key type K follows from it.
func NewController[K comparable](app *App, name string, reconcile func(ctx context.Context, key K) (controller.Result, error)) *ControllerBuilder[K] {
	b := &ControllerBuilder[K]{app: app, reconcile: reconcile}
	b.opts.Name = name
	if name == "" {
		b.errs = append(b.errs, errors.New("the controller has no name: give it one; it names its logs and metrics"))
	}
	if reconcile == nil {
		b.errs = append(b.errs, errors.New("reconcile is nil"))
	}
	return b
}

func (b *ControllerBuilder[K]) addKeySource(what string, w Watched, src func() controller.Source[cache.Key]) {
	info := w.handle()
	if info.err != nil {
		b.errs = append(b.errs, fmt.Errorf("%s: %w", what, info.err))
		return
	}
	s, ok := any(src()).(controller.Source[K])
	if !ok {
		var k K
		b.errs = append(b.errs, fmt.Errorf("%s(%s) enqueues a cache.Key but the controller's key is %T: use Watches with a mapping to %T", what, info.gvk.Kind, k, k))
		return
	}
	b.sources = append(b.sources, s)
}

// For reconciles the watched kind's objects themselves: each change
// enqueues the object's own key. A controller has one For; Owns names its
// kind as the owner.
func (b *ControllerBuilder[K]) For(w Watched) *ControllerBuilder[K] {
	if b.owner != nil {
		b.errs = append(b.errs, errors.New("For given twice: a controller has one primary kind; use Watches for others"))
		return b
	}
	info := w.handle()
	gk := info.gvk.GroupKind()
	b.owner = &gk
	b.forUID, b.forKeys = info.uid, info.keys
	if info.err == nil && b.app.shardsBy(sharding.ByUID) {
		info.shard()
	}
	b.addKeySource("For", w, w.forSource)
	return b
}

// Owns reconciles the owners of the watched kind's objects: each change
// enqueues the key of the object's controller owner when that owner is of
// the For kind (read from the object's owner references, deletes
// included). Give For first.
func (b *ControllerBuilder[K]) Owns(w Watched) *ControllerBuilder[K] {
	if b.owner == nil {
		b.errs = append(b.errs, fmt.Errorf("Owns(%s) before For: give For first, Owns maps objects to owners of the For kind", w.handle().gvk.Kind))
		return b
	}
	owner := *b.owner
	b.addKeySource("Owns", w, func() controller.Source[cache.Key] { return w.ownsSource(owner) })
	return b
}

// Watches adds any source of keys, such as controller.Watches(inf,
// mapKeys) for objects related by something other than ownership.
func (b *ControllerBuilder[K]) Watches(src controller.Source[K]) *ControllerBuilder[K] {
	if src == nil {
		b.errs = append(b.errs, errors.New("Watches(nil)"))
		return b
	}
	b.sources = append(b.sources, src)
	return b
}

// Workers sets how many keys are reconciled at once (never one key twice
// at once). Default 1.
func (b *ControllerBuilder[K]) Workers(n int) *ControllerBuilder[K] {
	b.opts.Workers = n
	return b
}

// RateLimiter sets how long a failed key waits before its retry. Default
// workqueue.DefaultRateLimiter.
func (b *ControllerBuilder[K]) RateLimiter(rl workqueue.RateLimiter[K]) *ControllerBuilder[K] {
	b.opts.RateLimiter = rl
	return b
}

// MaxRetries drops a key after n failed retries (0, the default: retry
// until it succeeds or fails terminally).
func (b *ControllerBuilder[K]) MaxRetries(n int) *ControllerBuilder[K] {
	b.opts.MaxRetries = n
	return b
}

// ReconcileTimeout bounds each reconcile (0, the default: no bound).
func (b *ControllerBuilder[K]) ReconcileTimeout(d time.Duration) *ControllerBuilder[K] {
	b.opts.ReconcileTimeout = d
	return b
}

// WithOptions changes any other controller.Options field (Dropped,
// SyncTimeout, DrainTimeout, SkipLeaderElection). Name, Logger and
// Registerer are the App's.
func (b *ControllerBuilder[K]) WithOptions(change func(*controller.Options[K])) *ControllerBuilder[K] {
	change(&b.opts)
	return b
}

// Complete makes the controller and adds it to the App, which runs it (on
// the leader, with leader election). It returns the controller, for
// Enqueue from elsewhere, and every mistake of the declaration; the App's
// Run returns them too.
func (b *ControllerBuilder[K]) Complete() (*controller.Controller[K], error) {
	c, err := b.complete()
	if err != nil {
		err = fmt.Errorf("kloop: controller %q: %w", b.opts.Name, err)
		b.app.fail(err)
		return nil, err
	}
	b.app.Add(c)
	return c, nil
}

func (b *ControllerBuilder[K]) complete() (*controller.Controller[K], error) {
	if len(b.sources) == 0 && len(b.errs) == 0 {
		b.errs = append(b.errs, errors.New("it watches nothing: give it For, Owns or Watches"))
	}
	if err := errors.Join(b.errs...); err != nil {
		return nil, err
	}
	b.opts.Logger = b.app.log
	b.opts.Registerer = b.app.opts.Registry
	c, err := controller.New[K](controller.ReconcilerFunc[K](b.reconcile), b.opts)
	if err != nil {
		return nil, err
	}
	for _, s := range b.sources {
		if err := c.Watch(s); err != nil {
			return nil, err
		}
	}
	if err := b.app.gate(c, b.forUID, b.forKeys); err != nil {
		return nil, err
	}
	return c, nil
}
