package notifier

import (
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/watcher"
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
}

// Notifier watches the resources of a Config and sends a notification to
// its sinks for every create, update and delete after its start.
type Notifier struct {
	cfg     Config
	opts    Options
	log     *slog.Logger
	m       *notifierMetrics
	factory *informer.Factory
	// regs are the notifier's handler registrations: Synced waits for
	// them to have taken the initial list.
	regs       []*informer.Registration
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
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	n := &Notifier{cfg: cfg, opts: opts, log: opts.Logger, m: m, synced: make(chan struct{})}
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
		src := &source{n: n, resource: r.name, kind: r.kind, apiVersion: r.apiVersion}
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
		src := &source{n: n, resource: cr.Resource, kind: cr.Resource, apiVersion: gvr.GroupVersion().String()}
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

	mgr, err := manager.New(manager.Options{
		MetricsAddr:     n.opts.HTTPAddr,
		HealthAddr:      n.opts.HTTPAddr,
		MetricsListener: n.opts.Listener,
		HealthListener:  n.opts.Listener,
		Gatherer:        n.opts.Gatherer,
		Logger:          n.log,
		ShutdownTimeout: n.opts.DrainTimeout + 20*time.Second,
	})
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
		n.log.Info("Notifier synced: notifying changes from now on", "informers", len(n.factory.Names()), "sinks", len(n.deliveries))
		close(n.synced)
		return nil
	})); err != nil {
		return err
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

// source turns one informer's notifications into events.
type source struct {
	n                *Notifier
	resource         string
	kind, apiVersion string
}

func (s *source) handler() objectHandler {
	return objectHandler{add: s.add, update: s.update, del: s.del}
}

func (s *source) add(obj watcher.Object, initial bool) {
	if initial {
		s.n.m.suppressed.WithLabelValues(s.kind, "initial").Inc()
		return
	}
	s.n.m.events.WithLabelValues(s.kind, string(Create)).Inc()
	s.emit(Create, obj, s.toMap(obj), nil, nil)
}

func (s *source) update(old, new watcher.Object) {
	s.n.m.events.WithLabelValues(s.kind, string(Update)).Inc()
	if old.GetResourceVersion() == new.GetResourceVersion() {
		// A replay or a relist: nothing happened.
		s.n.m.suppressed.WithLabelValues(s.kind, "unchanged").Inc()
		return
	}
	nm, om := s.toMap(new), s.toMap(old)
	// The policies judge every changed path; only the event's list is
	// capped (a capped list ends in "...", which is under no prefix).
	changes := diffAll(om, nm)
	reason := ""
	switch {
	case len(changes) == 0:
		reason = "noop"
	case s.n.cfg.Updates.IgnoreStatusOnly && onlyUnder(changes, "status"):
		reason = "status"
	case s.n.cfg.Updates.IgnoreMetadataOnly && onlyUnder(changes, "metadata"):
		reason = "metadata"
	}
	if reason != "" {
		s.n.m.suppressed.WithLabelValues(s.kind, reason).Inc()
		return
	}
	s.emit(Update, new, nm, om, capChanges(changes))
}

func (s *source) del(obj watcher.Object, _ bool) {
	s.n.m.events.WithLabelValues(s.kind, string(Delete)).Inc()
	s.emit(Delete, obj, s.toMap(obj), nil, nil)
}

// toMap returns obj as JSON-like values. An unstructured object's own map
// is returned: it is the cache's, read-only.
func (s *source) toMap(obj watcher.Object) map[string]any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		s.n.log.Error("Converting an object", "kind", s.kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "err", err)
		m = map[string]any{"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()}}
	}
	m["kind"], m["apiVersion"] = s.kind, s.apiVersion
	return m
}

func (s *source) emit(t EventType, obj watcher.Object, m, old map[string]any, changes []string) {
	kind := s.kind
	// Core Secrets, whether watched as the built-in resource or listed as
	// a custom resource (then unstructured).
	if s.apiVersion == "v1" && (kind == "Secret" || s.resource == "secrets") {
		m = redactSecret(m)
		if old != nil {
			old = redactSecret(old)
		}
	}
	ev := &Event{
		Type: t, Kind: kind, APIVersion: s.apiVersion, Resource: s.resource,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion(),
		Labels: obj.GetLabels(), Object: m, OldObject: old, Changes: changes, Cluster: s.n.cfg.ClusterName, Time: s.n.opts.Now(),
	}
	s.n.log.Debug("Processing "+string(t), "kind", kind, "namespace", ev.Namespace, "name", ev.Name, "changes", changes)
	for _, d := range s.n.deliveries {
		d.offer(ev)
	}
}
