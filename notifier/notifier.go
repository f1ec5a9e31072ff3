package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// Options configures a Notifier. The zero value works: logs to
// slog.Default, metrics on the kloop registry, no HTTP server, log sinks
// writing to stdout.
type Options struct {
	// Logger receives logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer holds the metrics; Gatherer is what /metrics serves.
	// Default: the kloop registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// HTTPAddr, if set, serves /metrics, /healthz and /readyz there.
	HTTPAddr string
	// HealthAddr, if set, serves /healthz and /readyz there instead.
	HealthAddr string
	// SecureMetrics, if set, serves /metrics over TLS to callers the API
	// server authenticates and authorizes (package metrics/secure).
	SecureMetrics *secure.Options
	// Listener, if set, is used instead of HTTPAddr; Run closes it.
	Listener net.Listener
	// Out receives the lines of log sinks. Default os.Stdout.
	Out io.Writer
	// DrainTimeout bounds how long a stopping notifier keeps delivering
	// what its sinks have queued. Default 10s.
	DrainTimeout time.Duration
	// RetryBase is the wait after a sink's first failed attempt, doubled
	// after each further one up to RetryMax. Defaults 500ms and 30s.
	RetryBase, RetryMax time.Duration
	// Now is the clock stamped on events. Default time.Now.
	Now func() time.Time
	// CheckpointInterval is how often the checkpoint is saved while it
	// changes (and once more at the stop). Default 1s: a crash sends
	// again what was delivered in at most the last interval.
	CheckpointInterval time.Duration
}

// DefaultCheckpointInterval is Options.CheckpointInterval's default.
const DefaultCheckpointInterval = time.Second

// Notifier watches the resources of a Config and sends a notification to
// its sinks for every create, update and delete after its start.
type Notifier struct {
	cfg     Config
	opts    Options
	log     *slog.Logger
	secure  *secure.Secure // for /metrics, if Options.SecureMetrics
	m       *notifierMetrics
	factory *informer.Factory
	// regs are the notifier's handler registrations: Synced waits for
	// them to have taken the initial list.
	regs    []*informer.Registration
	sources []*source
	// store keeps the checkpoint (nil: none); tracker is it in memory,
	// from Run on.
	store      checkpointStore
	tracker    *tracker
	deliveries []*delivery
	closers    []func()
	synced     chan struct{}

	mu      sync.Mutex
	started bool
}

// New builds a notifier: it validates cfg, creates the sinks and registers
// an informer per resource on one shared factory. It starts nothing and
// makes no request.
func New(restCfg *rest.Config, cfg Config, opts Options) (*Notifier, error) {
	cfg.Sinks = append([]SinkConfig(nil), cfg.Sinks...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	n := &Notifier{cfg: cfg, opts: opts, log: opts.Logger, m: m, synced: make(chan struct{})}
	if so := opts.SecureMetrics; so != nil && (opts.HTTPAddr != "" || opts.Listener != nil) {
		o := *so
		o.Logger = cmp.Or(o.Logger, opts.Logger)
		if n.secure, err = secure.New(restCfg, o); err != nil {
			return nil, err
		}
	}
	n.cfg.Checkpoint.defaults(cfg.Namespace, os.Getenv)
	switch ck := n.cfg.Checkpoint; ck.Type {
	case CheckpointFile:
		n.store = &fileStore{path: ck.Path}
	case CheckpointConfigMap:
		kc, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return nil, fmt.Errorf("notifier: checkpoint: %w", err)
		}
		n.store = &configMapStore{kc: kc, namespace: ck.Namespace, name: ck.Name}
	}
	outMu := &sync.Mutex{}
	for _, sc := range cfg.Sinks {
		f, err := newFilter(sc.Filter)
		if err != nil {
			return nil, fmt.Errorf("sink %s: filter: %w", sc.Name, err)
		}
		text, err := newTextFunc(sc.Name, sc.Template)
		if err != nil {
			return nil, fmt.Errorf("sink %s: template: %w", sc.Name, err)
		}
		s, closer, err := newSender(sc, text, opts.Out, outMu, opts.Now())
		if err != nil {
			return nil, err
		}
		if closer != nil {
			n.closers = append(n.closers, closer)
		}
		d := n.newDelivery(sc, s, f)
		d.advanced = sc.AdvancedFilter
		n.deliveries = append(n.deliveries, d)
	}

	n.factory = informer.NewFactory(restCfg, informer.FactoryOptions{Logger: opts.Logger, Registerer: opts.Registerer})
	for _, name := range cfg.Resources {
		r, _ := lookupResource(name)
		scope := informer.Scope{}
		if !r.clusterScoped {
			scope.Namespace = cfg.Namespace
		}
		src := n.newSource(r.name, r.kind, r.apiVersion, scope.Namespace, r.name == "configmap")
		reg, err := r.watch(n.factory, scope, src.handler())
		if err != nil {
			return nil, fmt.Errorf("notifier: watching %s: %w", r.name, err)
		}
		n.regs = append(n.regs, reg)
	}
	for _, cr := range cfg.CustomResources {
		gvr := schema.GroupVersionResource{Group: cr.Group, Version: cr.Version, Resource: cr.Resource}
		scope := informer.Scope{}
		if !cr.ClusterScoped {
			scope.Namespace = cfg.Namespace
		}
		inf, err := informer.OfUnstructured(n.factory, gvr, scope)
		if err != nil {
			return nil, fmt.Errorf("notifier: watching %s: %w", gvr, err)
		}
		src := n.newSource(cr.Resource, cr.Resource, gvr.GroupVersion().String(), scope.Namespace, cr.Group == "" && cr.Resource == "configmaps")
		h := src.handler()
		reg, err := inf.AddHandler(informer.HandlerFuncs[*unstructured.Unstructured]{
			AddFunc:    func(obj *unstructured.Unstructured, initial bool) { h.add(obj, initial) },
			UpdateFunc: func(old, new *unstructured.Unstructured) { h.update(old, new) },
			DeleteFunc: func(d informer.Deleted[*unstructured.Unstructured]) { h.del(d.Obj, d.FinalStateUnknown) },
		}, informer.HandlerOptions{Name: "notifier"})
		if err != nil {
			return nil, fmt.Errorf("notifier: watching %s: %w", gvr, err)
		}
		n.regs = append(n.regs, reg)
	}
	return n, nil
}

func (n *Notifier) newDelivery(sc SinkConfig, s sender, f *filter) *delivery {
	return &delivery{
		name: sc.Name, sender: s, filter: f, maxAttempts: sc.MaxAttempts,
		retryBase: n.opts.RetryBase, retryMax: n.opts.RetryMax, wait: sleepCtx,
		log: n.log, m: n.m, queue: make(chan *Event, sc.QueueSize),
	}
}

// Synced is closed once every informer has listed its resource and the
// notifier has taken that initial list: changes from then on are notified
// (objects that existed before are not). If the API server refuses an
// informer (403), Synced stays open and Run returns that error at once,
// naming the resource and the verb, rather than waiting for a permission
// that may never come.
func (n *Notifier) Synced() <-chan struct{} { return n.synced }

// Run watches and notifies until ctx is done, then stops taking events,
// delivers what the sinks have queued (for at most DrainTimeout) and
// returns: nil after a stop through ctx. It can be called once.
func (n *Notifier) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("notifier: Run called twice")
	}
	n.started = true
	n.mu.Unlock()
	defer func() {
		for _, c := range n.closers {
			c()
		}
	}()

	if n.store != nil {
		restored, err := n.store.load(ctx)
		if err != nil {
			return fmt.Errorf("notifier: loading the checkpoint from %s: %w (checkpoint.type: none runs without one)", n.store.where(), err)
		}
		switch {
		case restored == nil:
			n.log.Info("No checkpoint yet: the objects that exist now are not notified", "checkpoint", n.store.where())
		case restored.Overflow:
			n.log.Warn("The checkpoint overflowed its bound: changes made while the notifier was down are not notified",
				"checkpoint", n.store.where(), "maxObjects", n.cfg.Checkpoint.MaxObjects)
		default:
			n.log.Info("Checkpoint loaded: notifying what changed while the notifier was down", "checkpoint", n.store.where())
		}
		n.tracker = newTracker(n.cfg.Checkpoint.MaxObjects, restored)
		for _, src := range n.sources {
			src.restore()
		}
		defer func() { _ = n.saveCheckpoint(context.WithoutCancel(ctx), true) }()
	}

	mopts := manager.Options{
		MetricsAddr:     n.opts.HTTPAddr,
		HealthAddr:      cmp.Or(n.opts.HealthAddr, n.opts.HTTPAddr),
		MetricsListener: n.opts.Listener,
		HealthListener:  n.opts.Listener,
		Gatherer:        n.opts.Gatherer,
		Logger:          n.log,
		ShutdownTimeout: n.opts.DrainTimeout + 20*time.Second,
	}
	if n.secure != nil {
		mopts.WrapMetrics, mopts.MetricsTLS = n.secure.Wrap, n.secure.TLSConfig()
	}
	mgr, err := manager.New(mopts)
	if err != nil {
		return err
	}
	if err := mgr.Add(n.factory); err != nil {
		return err
	}
	for _, d := range n.deliveries {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			d.run(ctx, n.opts.DrainTimeout)
			return nil
		})); err != nil {
			return err
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if err := n.factory.WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// The caches are full, but a handler may not have taken all of
		// its initial adds yet; a change to such an object would merge
		// into its initial add and go unnotified.
		for _, reg := range n.regs {
			if err := reg.WaitForSync(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		// Objects in the checkpoint but not in the initial lists were
		// deleted while the notifier was down.
		for _, src := range n.sources {
			src.sweep()
		}
		// A checkpoint must exist before the first change is notified:
		// a crash before the first periodic save would otherwise leave
		// none, and the next start would take every change since as
		// part of its initial list.
		if n.tracker != nil {
			if err := n.saveCheckpoint(ctx, false); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("notifier: saving the checkpoint to %s: %w", n.store.where(), err)
			}
		}
		n.log.Info("Notifier synced: notifying changes from now on", "informers", len(n.factory.Names()), "sinks", len(n.deliveries))
		close(n.synced)
		return nil
	})); err != nil {
		return err
	}
	if n.tracker != nil {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			t := time.NewTicker(n.opts.CheckpointInterval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					_ = n.saveCheckpoint(ctx, false) // logged; retried on the next tick
				case <-ctx.Done():
					return nil
				}
			}
		})); err != nil {
			return err
		}
	}
	n.log.Info("Starting notifier", "namespace", n.cfg.Namespace, "resources", n.cfg.Resources, "customResources", len(n.cfg.CustomResources))
	defer n.log.Info("Notifier stopped")
	return mgr.Start(ctx)
}

// Run is New followed by Run.
func Run(ctx context.Context, restCfg *rest.Config, cfg Config, opts Options) error {
	n, err := New(restCfg, cfg, opts)
	if err != nil {
		return err
	}
	return n.Run(ctx)
}

// saveCheckpoint saves the checkpoint if it changed. final: the stop's
// last save, after every sink is done.
func (n *Notifier) saveCheckpoint(ctx context.Context, final bool) error {
	st, changed := n.tracker.snapshot()
	if !changed {
		return nil
	}
	if final {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	err := n.store.save(ctx, st)
	if errors.Is(err, errTooLarge) {
		n.log.Warn("The checkpoint outgrew its store: marking it overflowed", "checkpoint", n.store.where())
		n.tracker.setOverflow()
		st, _ = n.tracker.snapshot()
		err = n.store.save(ctx, st)
	}
	if err != nil {
		n.tracker.markDirty()
		if ctx.Err() == nil {
			n.log.Error("Saving the checkpoint", "checkpoint", n.store.where(), "err", err)
		}
		return err
	}
	if st.Overflow {
		n.m.checkpointObjects.Set(-1)
	} else {
		total := 0
		for _, objs := range st.Scopes {
			total += len(objs)
		}
		n.m.checkpointObjects.Set(float64(total))
	}
	return nil
}
