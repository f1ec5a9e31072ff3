package kloop

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/watcher"
)

// ControllerBuilder declares one controller of an App whose key is a
// cache.Key, in one statement:
//
//	err := kloop.NewController(app, "foo-controller", r.Reconcile).
//		For(foos).Owns(deployments).Workers(2).Complete()
//
// A controller with a key of its own type is declared with
// NewKeyedController instead.
type ControllerBuilder struct {
	b       builder[cache.Key]
	owner   *schema.GroupKind
	forUID  func(cache.Key) (string, bool)
	forKeys func() []cache.Key
	forObj  func(cache.Key) (watcher.Object, bool)
	gates   []*kindgate.Gate // of For and Owns (Options.WaitForKinds)
}

// NewController starts the declaration of a controller named name (its
// logs, metrics and queue carry the name; give each controller of a
// program its own) that calls reconcile for the key of each object that
// For, Owns or Watches enqueues. Pass a method value (r.Reconcile) or a
// function.
//
// A failed reconcile shows on its For object, where kubectl describe
// looks: each error is recorded as a Warning event on the object (the
// App's Recorder), reason ReasonReconcileFailed and the error's text, or
// the reason and text of the outermost error in its chain with an
// EventReason() string method. Repeats add to one Event's series. An
// error retrying cannot fix (see controller.Reconciler: Invalid, an
// admission denial, a field-ownership conflict) is not retried unless wrapped by
// controller.Retry; set a condition on the object too
// (conditions.Failed).
func NewController(app *App, name string, reconcile func(ctx context.Context, key cache.Key) (controller.Result, error)) *ControllerBuilder {
	return &ControllerBuilder{b: newBuilder(app, name, reconcile)}
}

// For reconciles the watched kind's objects themselves: each change
// enqueues the object's own key. A controller has one For; Owns names its
// kind as the owner.
func (b *ControllerBuilder) For(w Watched) *ControllerBuilder {
	if b.owner != nil {
		b.b.errs = append(b.b.errs, errors.New("For given twice: a controller has one primary kind; use Watches for others"))
		return b
	}
	info := w.handle()
	gk := info.gvk.GroupKind()
	b.owner = &gk
	b.forUID, b.forKeys, b.forObj = info.uid, info.keys, info.obj
	if info.err == nil && b.b.app.shardsBy(sharding.ByUID) {
		info.shard()
	}
	b.addSource("For", info, w.forSource)
	return b
}

// Owns reconciles the owners of the watched kind's objects: each change
// enqueues the key of the object's controller owner when that owner is of
// the For kind (read from the object's owner references, deletes
// included). Give For first.
func (b *ControllerBuilder) Owns(w Watched) *ControllerBuilder {
	info := w.handle()
	if b.owner == nil {
		b.b.errs = append(b.b.errs, fmt.Errorf("Owns(%s) before For: give For first, Owns maps objects to owners of the For kind", info.gvk.Kind))
		return b
	}
	owner := *b.owner
	b.addSource("Owns", info, func() controller.Source[cache.Key] { return w.ownsSource(owner) })
	return b
}

func (b *ControllerBuilder) addSource(what string, info handleInfo, src func() controller.Source[cache.Key]) {
	if info.err != nil {
		b.b.errs = append(b.b.errs, fmt.Errorf("%s: %w", what, info.err))
		return
	}
	if info.gate != nil && !slices.Contains(b.gates, info.gate) {
		b.gates = append(b.gates, info.gate)
	}
	b.b.sources = append(b.b.sources, src())
}

// Watches adds any source of keys, such as MapTo(h, mapKeys) for objects
// related by something other than ownership.
func (b *ControllerBuilder) Watches(src controller.Source[cache.Key]) *ControllerBuilder {
	b.b.watches(src)
	return b
}

// Workers sets how many keys are reconciled at once (never one key twice
// at once). Default 1.
func (b *ControllerBuilder) Workers(n int) *ControllerBuilder {
	b.b.opts.Workers = n
	return b
}

// WithOptions changes any other controller.Options field: RateLimiter
// (how long a failed key waits before its retry), MaxRetries (drop a key
// after n failed retries), ReconcileTimeout (a bound on each reconcile),
// Debounce (reconcile a burst of changes once, after it),
// Dropped, SyncTimeout, DrainTimeout, SkipLeaderElection:
//
//	.WithOptions(func(o *controller.Options[cache.Key]) { o.MaxRetries = 5 })
//
// Name, Logger and Registerer are the App's; Clock is the App's unless
// set; OwnWrite is the App client's Wrote unless set; WaitForSync waits for
// every informer the App holds unless set (see "When reads are answered" in
// docs/controllers.md); Tracer and OwnWriteSpan are the App's when it
// traces (Options.Traces).
func (b *ControllerBuilder) WithOptions(change func(*controller.Options[cache.Key])) *ControllerBuilder {
	change(&b.b.opts)
	return b
}

// Complete makes the controller and adds it to the App, which runs it (on
// the leader, with leader election). It returns the controller, for
// Enqueue from elsewhere, and every mistake of the declaration; the App's
// Run returns them too.
func (b *ControllerBuilder) Complete() (*controller.Controller[cache.Key], error) {
	if b.forObj != nil && b.b.reconcile != nil {
		b.b.reconcile = recordFailures(b.b.app.recorder, b.forObj, b.b.reconcile)
	}
	return b.b.complete("it watches nothing: give it For, Owns or Watches", func(c *controller.Controller[cache.Key]) error {
		a := b.b.app
		if err := a.holdKinds(c, b.gates); err != nil {
			return err
		}
		var place func(cache.Key) (string, string, bool)
		if a.shardsBy(sharding.ByUID) {
			if b.forUID == nil {
				return errors.New("sharding by UID needs a For kind: its objects' UIDs place the keys")
			}
			place = func(k cache.Key) (string, string, bool) {
				uid, ok := b.forUID(k)
				return "", uid, ok
			}
		}
		return gate(a, c, a.heldBy(c), place, b.forKeys)
	})
}

// KeyedControllerBuilder declares one controller of an App whose key is
// K, a type of the program's own: its sources are Watches that map
// objects to K (MapTo, controller.Watches). For and Owns enqueue a
// cache.Key, so only a ControllerBuilder has them.
type KeyedControllerBuilder[K comparable] struct {
	b     builder[K]
	place func(K) (cluster, value string, ok bool) // Sharded
	keys  func() []K
}

// NewKeyedController starts the declaration of a controller named name
// that calls reconcile for each key of type K its Watches enqueue, for
// work that is not one object's, such as one key per namespace or per
// node:
//
//	kloop.NewKeyedController(app, "per-namespace", r.Reconcile).
//		Watches(kloop.MapTo(pods, func(p *corev1.Pod) []string { return []string{p.Namespace} })).Complete()
//
// K follows from reconcile. In an App that shards, a keyed controller says
// how its keys are placed (Sharded).
func NewKeyedController[K comparable](app *App, name string, reconcile func(ctx context.Context, key K) (controller.Result, error)) *KeyedControllerBuilder[K] {
	return &KeyedControllerBuilder[K]{b: newBuilder(app, name, reconcile)}
}

// Watches adds a source of keys, such as MapTo(h, mapKeys). A source with
// a method Err() error that returns an error (MapTo of a handle that
// failed) fails the declaration with it.
func (b *KeyedControllerBuilder[K]) Watches(src controller.Source[K]) *KeyedControllerBuilder[K] {
	b.b.watches(src)
	return b
}

// Workers is ControllerBuilder.Workers.
func (b *KeyedControllerBuilder[K]) Workers(n int) *KeyedControllerBuilder[K] {
	b.b.opts.Workers = n
	return b
}

// WithOptions is ControllerBuilder.WithOptions.
func (b *KeyedControllerBuilder[K]) WithOptions(change func(*controller.Options[K])) *KeyedControllerBuilder[K] {
	change(&b.b.opts)
	return b
}

// Sharded says, for an App that shards (Options.Sharding), where each key
// is: place returns the fleet cluster of its object ("" for the App's own)
// and the value the group's Key hashes (the namespace, for ByNamespace);
// keys lists the keys of the objects the controller is for, enqueued when
// this replica takes over their slot (see sharding.Gate). Without
// Sharding it has no effect. A fleet controller's For calls it.
func (b *KeyedControllerBuilder[K]) Sharded(place func(K) (cluster, value string, ok bool), keys func() []K) *KeyedControllerBuilder[K] {
	b.place, b.keys = place, keys
	return b
}

// Complete is ControllerBuilder.Complete.
func (b *KeyedControllerBuilder[K]) Complete() (*controller.Controller[K], error) {
	return b.b.complete("it watches nothing: give it Watches", func(c *controller.Controller[K]) error {
		if b.b.app.member != nil && (b.place == nil || b.keys == nil) {
			return errors.New("sharding needs a controller with a For kind, whose objects are what a replica takes over: declare it with NewController and a cache.Key, or say where its keys are with Sharded (a fleet controller's For does)")
		}
		return gate(b.b.app, c, nil, b.place, b.keys)
	})
}

// builder is what both builders share: the declaration and its mistakes.
type builder[K comparable] struct {
	app       *App
	reconcile func(ctx context.Context, key K) (controller.Result, error)
	opts      controller.Options[K]
	sources   []controller.Source[K]
	errs      []error
}

func newBuilder[K comparable](app *App, name string, reconcile func(ctx context.Context, key K) (controller.Result, error)) builder[K] {
	b := builder[K]{app: app, reconcile: reconcile}
	b.opts.Name = name
	if name == "" {
		b.errs = append(b.errs, errors.New("the controller has no name: give it one; it names its logs and metrics"))
	}
	if reconcile == nil {
		b.errs = append(b.errs, errors.New("reconcile is nil"))
	}
	return b
}

func (b *builder[K]) watches(src controller.Source[K]) {
	if src == nil {
		b.errs = append(b.errs, errors.New("Watches(nil)"))
		return
	}
	if f, ok := src.(interface{ Err() error }); ok && f.Err() != nil {
		b.errs = append(b.errs, f.Err())
		return
	}
	b.sources = append(b.sources, src)
}

// complete makes the controller, gates it (sharding) and adds it to the
// App; nothing says what to give a controller that watches nothing.
func (b *builder[K]) complete(nothing string, gate func(*controller.Controller[K]) error) (*controller.Controller[K], error) {
	c, err := b.make(nothing, gate)
	if err != nil {
		err = fmt.Errorf("kloop: controller %q: %w", b.opts.Name, err)
		b.app.fail(err)
		return nil, err
	}
	b.app.Add(c)
	b.app.mu.Lock()
	if !b.app.started {
		b.app.controllers++
	}
	b.app.mu.Unlock()
	return c, nil
}

func (b *builder[K]) make(nothing string, gate func(*controller.Controller[K]) error) (*controller.Controller[K], error) {
	if len(b.sources) == 0 && len(b.errs) == 0 {
		b.errs = append(b.errs, errors.New(nothing))
	}
	if err := errors.Join(b.errs...); err != nil {
		return nil, err
	}
	b.opts.Logger = b.app.log
	b.opts.Registerer = b.app.opts.Registry
	if b.opts.Clock == nil {
		b.opts.Clock = b.app.opts.Clock
	}
	if b.opts.OwnWrite == nil && b.app.client != nil {
		b.opts.OwnWrite = b.app.client.Wrote
	}
	if b.opts.WaitForSync == nil {
		b.opts.WaitForSync = b.app.waitForInformers
	}
	if started := b.opts.Started; started != nil {
		b.opts.Started = func() { started(); b.app.controllerStarted() }
	} else {
		b.opts.Started = b.app.controllerStarted
	}
	if t := b.app.tracer; t != nil && b.opts.Tracer == nil {
		b.opts.Tracer = t
		if b.opts.OwnWriteSpan == nil && b.app.client != nil {
			b.opts.OwnWriteSpan = b.app.client.WroteSpan
		}
	}
	c, err := controller.New[K](controller.ReconcilerFunc[K](b.reconcile), b.opts)
	if err != nil {
		return nil, err
	}
	for _, s := range b.sources {
		if err := c.Watch(s); err != nil {
			return nil, err
		}
	}
	if err := gate(c); err != nil {
		return nil, err
	}
	return c, nil
}
