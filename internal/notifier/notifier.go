package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/informer"
)

// Options configures a Notifier. The zero value works: log sinks write to
// stdout, kubewatch's drain and retry defaults. Logger, metrics registry,
// HTTP servers and leader election are the App's (kloop.Options).
type Options struct {
	// Out receives the lines of log sinks. Default os.Stdout.
	Out io.Writer
	// DrainTimeout bounds how long a stopping notifier keeps delivering
	// what its sinks have queued. Default 10s. The App's ShutdownTimeout
	// must be longer (New checks).
	DrainTimeout time.Duration
	// RetryBase is the wait after a sink's first failed attempt, doubled
	// after each further one up to RetryMax. Defaults 500ms and 30s.
	RetryBase, RetryMax time.Duration
	// Now is the clock stamped on events, and the one incident windows
	// and quiet times are judged by. Default time.Now.
	Now func() time.Time
	// CheckpointInterval is how often the checkpoint is saved while it
	// changes (and once more at the stop). Default 1s: a crash sends
	// again what was delivered in at most the last interval.
	CheckpointInterval time.Duration
	// RESTConfig is what pods/log is read with when incidents.loglines
	// asks for log lines; nil: explanations say logs are unavailable.
	RESTConfig *rest.Config
}

// DefaultCheckpointInterval is Options.CheckpointInterval's default.
const DefaultCheckpointInterval = time.Second

// Notifier watches the resources of a Config and sends a notification to
// its sinks for every create, update and delete after its start. It is a
// runnable of a kloop.App: New adds it, the App's Run runs it.
type Notifier struct {
	app  *kloop.App
	cfg  Config
	opts Options
	log  *slog.Logger
	m    *notifierMetrics
	// watched are the notifier's informers, made in New on the App's
	// factory; their handlers are added in Start, once the checkpoint is
	// loaded.
	watched []watched
	sources []*source
	// store keeps the checkpoint (nil: none); tracker is it in memory,
	// from Start on.
	store      checkpointStore
	tracker    *tracker
	deliveries []*delivery
	closers    []func()
	synced     chan struct{}
	// incidents is nil unless a sink sends incidents; logs is nil unless
	// incidents.loglines asks for log lines; silencer is nil without a
	// silences section, namespaces then the informer it learns
	// namespaces' silences from.
	incidents  *incidentTracker
	logs       *logSource
	silencer   *silencer
	namespaces *informerOf

	mu      sync.Mutex
	started bool
}

// watched is one informer of the notifier and the source it feeds.
type watched struct {
	src *source
	inf informerOf
}

// New builds a notifier on app and adds it to app as a runnable: it
// validates cfg, creates the sinks, and asks the App's factory for an
// informer per resource (kloop.Objects for the built-in kinds,
// kloop.Unstructured for custom resources), in cfg.Namespace whatever the
// App's namespace. It starts nothing and makes no request; app.Run runs
// it. Its metrics are registered on the App's registry, its logs go to the
// App's logger, and its checkpoint ConfigMap is written through the App's
// client.
//
// The notifier needs leadership: with the App's leader election only the
// leader notifies, and it loads the checkpoint when it takes over, so a
// new leader notifies what changed since the last one's last save. The
// informers run on every replica, as the App's always do.
func New(app *kloop.App, cfg Config, opts Options) (*Notifier, error) {
	cfg.Sinks = append([]SinkConfig(nil), cfg.Sinks...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	opts.DrainTimeout = cmp.Or(max(opts.DrainTimeout, 0), DefaultDrainTimeout)
	opts.RetryBase = cmp.Or(max(opts.RetryBase, 0), DefaultRetryBase)
	opts.RetryMax = cmp.Or(max(opts.RetryMax, 0), DefaultRetryMax)
	opts.CheckpointInterval = cmp.Or(max(opts.CheckpointInterval, 0), DefaultCheckpointInterval)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if st := app.Options().ShutdownTimeout; st > 0 && st <= opts.DrainTimeout {
		return nil, fmt.Errorf("notifier: the App's ShutdownTimeout (%v) must be longer than DrainTimeout (%v)", st, opts.DrainTimeout)
	}
	m, err := newMetrics(app.Options().Registry)
	if err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	n := &Notifier{app: app, cfg: cfg, opts: opts, log: app.Logger(), m: m, synced: make(chan struct{})}
	for _, w := range cfg.Warnings {
		n.log.Warn("Config: "+w, "config", "warning")
	}
	if len(cfg.Resources) == 0 && len(cfg.CustomResources) == 0 && len(cfg.Warnings) == 0 {
		n.log.Warn("Config: nothing to watch, so nothing is notified")
	}
	n.cfg.Checkpoint.defaults(cfg.Namespace, os.Getenv)
	switch ck := n.cfg.Checkpoint; ck.Type {
	case CheckpointFile:
		n.store = &fileStore{path: ck.Path}
	case CheckpointConfigMap:
		cms, err := client.NewResource[*corev1.ConfigMap](app.Client(), corev1.SchemeGroupVersion.WithResource("configmaps"))
		if err != nil {
			return nil, fmt.Errorf("notifier: checkpoint: %w", err)
		}
		n.store = &configMapStore{cms: cms, namespace: ck.Namespace, name: ck.Name}
	}
	for _, sc := range cfg.Sinks {
		if sc.Incidents && n.incidents == nil {
			n.incidents = newIncidentTracker(cmp.Or(cfg.Incidents.Window, DefaultIncidentWindow))
		}
	}
	if n.incidents != nil && cfg.Incidents.LogLines > 0 {
		n.logs = &logSource{}
		if opts.RESTConfig != nil {
			if n.logs.fetcher, err = newLogFetcher(opts.RESTConfig, cfg.Incidents.LogLines, cfg.Incidents.Redact); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Silences.Enabled {
		if n.silencer, err = newSilencer(cfg.Silences); err != nil {
			return nil, err
		}
		r, _ := lookupResource("namespace")
		inf, err := r.watch(app, r.gvr(), kloop.ObjectsOptions{ClusterScoped: true})
		if err != nil {
			return nil, fmt.Errorf("notifier: watching namespaces for silences: %w", err)
		}
		n.namespaces = &inf
	}
	outMu := &sync.Mutex{}
	for _, sc := range cfg.Sinks {
		f, err := newFilter(sc.Filter)
		if err != nil {
			return nil, fmt.Errorf("sink %s: filter: %w", sc.Name, err)
		}
		newText := newTextFunc
		if sc.Incidents {
			newText = incidentTextFunc
		}
		text, err := newText(sc.Name, sc.Template)
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
		if sc.Incidents {
			d.incidents, d.updates = n.incidents, incidentUpdates(sc.Type)
		}
		n.deliveries = append(n.deliveries, d)
	}

	for _, name := range cfg.Resources {
		r, _ := lookupResource(name)
		opts := kloop.ObjectsOptions{Namespace: &cfg.Namespace, ClusterScoped: r.clusterScoped}
		ns := cfg.Namespace
		if r.clusterScoped {
			ns = ""
		}
		inf, err := r.watch(app, r.gvr(), opts)
		if err != nil {
			return nil, fmt.Errorf("notifier: watching %s: %w", r.name, err)
		}
		n.watched = append(n.watched, watched{n.newSource(r.name, r.kind, r.apiVersion, ns, r.name == "configmap"), inf})
	}
	for _, cr := range cfg.CustomResources {
		gvr := schema.GroupVersionResource{Group: cr.Group, Version: cr.Version, Resource: cr.Resource}
		opts := kloop.ObjectsOptions{Namespace: &cfg.Namespace, ClusterScoped: cr.ClusterScoped}
		ns := cfg.Namespace
		if cr.ClusterScoped {
			ns = ""
		}
		inf, err := kloop.Unstructured(app, gvr, opts)
		if err != nil {
			return nil, fmt.Errorf("notifier: watching %s: %w", gvr, err)
		}
		src := n.newSource(cr.Resource, cr.Resource, gvr.GroupVersion().String(), ns, cr.Group == "" && cr.Resource == "configmaps")
		n.watched = append(n.watched, watched{src, informerFor(inf)})
	}
	mgr := app.Manager()
	mgr.AddReadyzCheck("notifier", func(*http.Request) error {
		select {
		case <-n.synced:
			return nil
		default:
		}
		if st := mgr.Status(); st.LeaderElection && !st.Leading {
			return nil // a standby: ready once its caches are, which the manager's own check reports
		}
		return errors.New("the notifier has not taken its initial lists yet")
	})
	app.Add(n)
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
// informer (403), Synced stays open and the App's Run returns that error
// at once, naming the resource and the verb, rather than waiting for a
// permission that may never come.
func (n *Notifier) Synced() <-chan struct{} { return n.synced }

// Start is the notifier's life as the App's runnable (the App's Run calls
// it, on the leader): it loads the checkpoint, takes the informers'
// initial lists, and notifies until ctx is done; then it takes no new
// events, delivers what the sinks have queued (for at most DrainTimeout),
// saves the checkpoint and returns: nil after a stop through ctx.
func (n *Notifier) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("notifier: started twice")
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
		if restored != nil && n.incidents != nil {
			n.incidents.restore(restored.Incidents)
		}
		for _, src := range n.sources {
			src.restore()
		}
		defer func() { _ = n.saveCheckpoint(context.WithoutCancel(ctx), true) }()
	}

	n.log.Info("Starting notifier", "namespace", n.cfg.Namespace, "resources", n.cfg.Resources, "customResources", len(n.cfg.CustomResources))
	defer n.log.Info("Notifier stopped")
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // the deliveries drain after ctx is done
	defer cancel()
	for _, d := range n.deliveries {
		wg.Go(func() { d.run(ctx, n.opts.DrainTimeout) })
	}
	var regs []*informer.Registration
	defer func() {
		// No new event once stopping: what a handler is in the middle of
		// is offered before the sinks stop taking events.
		for _, r := range regs {
			r.Remove()
		}
		for _, r := range regs {
			<-r.Done()
		}
	}()
	if n.namespaces != nil {
		// Before the sources: a namespace's silence is known before
		// the changes in it.
		reg, err := n.namespaces.attach(n.silencer.handler())
		if err != nil {
			return fmt.Errorf("notifier: watching namespaces for silences: %w", err)
		}
		regs = append(regs, reg)
		if err := errors.Join(n.namespaces.waitForSync(ctx), reg.WaitForSync(ctx)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("notifier: watching namespaces for silences: %w", err)
		}
	}
	for _, w := range n.watched {
		reg, err := w.inf.attach(w.src.handler())
		if err != nil {
			return fmt.Errorf("notifier: watching %s: %w", w.src.resource, err)
		}
		regs = append(regs, reg)
	}
	if err := n.sync(ctx, regs); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	var saves, resolves <-chan time.Time
	if n.tracker != nil {
		t := time.NewTicker(n.opts.CheckpointInterval)
		defer t.Stop()
		saves = t.C
	}
	if n.incidents != nil {
		// A resolve is sent at most a quarter of the window (or a
		// second) late.
		t := time.NewTicker(min(max(n.incidents.window/4, 10*time.Millisecond), time.Second))
		defer t.Stop()
		resolves = t.C
	}
	for {
		select {
		case <-saves:
			_ = n.saveCheckpoint(ctx, false) // logged; retried on the next tick
		case <-resolves:
			n.resolveDue()
		case <-ctx.Done():
			return nil
		}
	}
}

// sync waits until the informers have listed and the handlers have taken
// those lists, notifies the deletes made while the notifier was down,
// saves the first checkpoint and closes Synced.
func (n *Notifier) sync(ctx context.Context, regs []*informer.Registration) error {
	for _, w := range n.watched {
		if err := w.inf.waitForSync(ctx); err != nil {
			return err
		}
	}
	// The caches are full, but a handler may not have taken all of its
	// initial adds yet; a change to such an object would merge into its
	// initial add and go unnotified.
	for _, reg := range regs {
		if err := reg.WaitForSync(ctx); err != nil {
			return err
		}
	}
	// Objects in the checkpoint but not in the initial lists were deleted
	// while the notifier was down.
	for _, src := range n.sources {
		src.sweep()
	}
	// A checkpoint must exist before the first change is notified: a
	// crash before the first periodic save would otherwise leave none, and
	// the next start would take every change since as part of its
	// initial list.
	if n.tracker != nil {
		if err := n.saveCheckpoint(ctx, false); err != nil {
			return fmt.Errorf("notifier: saving the checkpoint to %s: %w", n.store.where(), err)
		}
	}
	n.log.Info("Notifier synced: notifying changes from now on", "informers", len(n.watched), "sinks", len(n.deliveries))
	close(n.synced)
	return nil
}

// saveCheckpoint saves the checkpoint if it changed. final: the stop's
// last save, after every sink is done.
func (n *Notifier) saveCheckpoint(ctx context.Context, final bool) error {
	var incidents *incidentState
	incChanged := false
	if n.incidents != nil {
		incidents, incChanged = n.incidents.snapshot()
	}
	st, changed := n.tracker.snapshot(incChanged)
	if !changed {
		return nil
	}
	st.Incidents = incidents
	if final {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	err := n.store.save(ctx, st)
	if errors.Is(err, errTooLarge) {
		n.log.Warn("The checkpoint outgrew its store: marking it overflowed", "checkpoint", n.store.where())
		n.tracker.setOverflow()
		st, _ = n.tracker.snapshot(true)
		st.Incidents = incidents
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
