package kloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	runtimedebug "runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/memlimit"
	"github.com/kloop-dev/kloop/internal/tracing"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/metrics"
	"github.com/kloop-dev/kloop/metrics/secure"
	"github.com/kloop-dev/kloop/record"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
)

// DefaultName is the default of Options.Name.
const DefaultName = "kloop"

// serviceAccountNamespaceFile holds the namespace of a pod's service
// account; it is the default namespace of the leader-election Lease in a
// cluster.
var serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// App is one controller program: it owns one manager, one informer factory,
// one client and one event recorder, and runs them. Declare what the program handles with Objects
// and NewController, then call Run.
//
// Mistakes in declarations (a type missing from the scheme, a kind the API
// server does not serve, an Owns without a For) are collected rather than
// returned one by one: Run returns them all, each naming what to fix, and
// starts nothing. Err returns them so far.
type App struct {
	cfg      *rest.Config
	opts     Options
	log      *slog.Logger
	mgr      *manager.Manager
	debug    *debug.Server
	client   *client.Client
	recorder *record.Recorder
	// tracer is Options.Traces' tracer of kloop's spans, nil when off.
	tracer trace.Tracer

	mu      sync.Mutex
	errs    []error
	started bool
	// controllers counts the controllers declared before Run whose workers
	// have not started yet; ready is closed when it reaches 0 under Run.
	controllers int
	ready       chan struct{}
	readyClosed bool
	factory     *informer.Factory
	discovery   discovery.DiscoveryInterface
	metadata    metadata.Interface                              // CatchUp's lists, made on first use
	resources   map[schema.GroupVersion]*metav1.APIResourceList // discovered, by group and version
	runnables   []manager.Runnable
	member      *sharding.Member        // Options.Sharding or ShardOf
	shardKey    sharding.Key            // how member places keys
	shardFlags  map[string]*atomic.Bool // sharded informers (see sharding.go)
	webhooks    *webhooks               // Options.WebhookAddr, WebhookLocal (see webhook.go)
	kinds       kinds                   // Options.WaitForKinds (see kinds.go)
	// shardCluster and left are Options.ShardOf's Cluster and Left.
	shardCluster string
	left         <-chan struct{}
	gatherers    []prometheus.Gatherer // AddGatherer
	// watchNS is the namespace of the namespaced kinds' informers: "",
	// Options.Namespace, or Options.Namespaces joined by commas (see
	// informer.Scope).
	watchNS string
}

// New returns an App talking to the API server at cfg. It validates opts
// and does no I/O.
func New(cfg *rest.Config, opts Options) (*App, error) {
	if cfg == nil {
		return nil, errors.New("kloop.New: cfg is nil: pass the *rest.Config of the cluster (the cli package builds one from --kubeconfig)")
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Scheme == nil {
		opts.Scheme = clientgoscheme.Scheme
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = metrics.Registry
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	watchNS, err := namespaceSet(&opts)
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, opts: opts, log: opts.Logger, watchNS: watchNS, ready: make(chan struct{})}
	ccfg := cfg
	if opts.ClientTimeout > 0 {
		ccfg = rest.CopyConfig(cfg)
		ccfg.Timeout = opts.ClientTimeout
	}
	c, err := client.New(ccfg, client.Options{Scheme: opts.Scheme, FieldManager: opts.Name, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("kloop.New: %w", err)
	}
	a.client = c
	if opts.Traces != nil {
		a.tracer = opts.Traces.Tracer(tracing.Scope)
	} else if on, err := tracing.Enabled("", os.Getenv); on || err != nil {
		// Not an error: an App inside another (a fleet's cluster, a
		// simulated kubelet) has no exporter of its own.
		opts.Logger.Warn("The OTEL_* environment asks for traces, and this App has no exporter (Options.Traces is nil), so it sends none: "+
			"set Options.Traces to what otlp.New (package github.com/kloop-dev/kloop/otlp) returns (cli does), or set OTEL_TRACES_EXPORTER=none", "err", err)
	}
	host, _ := os.Hostname()
	a.recorder, err = record.New(cfg, record.Options{
		Component:  opts.Name,
		Host:       host,
		Scheme:     opts.Scheme,
		Logger:     opts.Logger,
		Registerer: opts.Registry,
		Clock:      opts.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("kloop.New: %w", err)
	}

	mopts := manager.Options{
		MetricsAddr:     opts.MetricsAddr,
		HealthAddr:      opts.HealthAddr,
		ShutdownTimeout: opts.ShutdownTimeout,
		Gatherer:        opts.Registry,
		Logger:          opts.Logger,
	}
	mopts.Gatherer = prometheus.Gatherers{opts.Registry, prometheus.GathererFunc(a.gatherMore)}
	var sm *secure.Secure
	if opts.SecureMetrics != nil && (addrOn(opts.MetricsAddr) || addrOn(opts.DebugAddr)) {
		so := *opts.SecureMetrics
		if so.Logger == nil {
			so.Logger = opts.Logger
		}
		if sm, err = secure.New(cfg, so); err != nil {
			return nil, fmt.Errorf("kloop.New: secure metrics: %w", err)
		}
		if addrOn(opts.MetricsAddr) {
			mopts.WrapMetrics, mopts.MetricsTLS = sm.Wrap, sm.TLSConfig()
		}
	}
	if le := opts.LeaderElection; le != nil {
		el, err := a.newElector(*le)
		if err != nil {
			return nil, err
		}
		mopts.LeaderElection = el
	}
	mgr, err := manager.New(mopts)
	if err != nil {
		return nil, err
	}
	a.mgr = mgr
	if err := a.shardWith(opts); err != nil {
		return nil, err
	}
	if addrOn(opts.DebugAddr) {
		dopts := debug.Options{Addr: opts.DebugAddr, Logger: opts.Logger}
		if sm != nil {
			dopts.Wrap, dopts.TLS = sm.Wrap, sm.TLSConfig()
		}
		if a.debug, err = debug.New(mgr, dopts); err != nil {
			return nil, fmt.Errorf("kloop.New: DebugAddr: %w", err)
		}
		if err := mgr.Add(a.debug); err != nil {
			return nil, err
		}
	}
	if a.webhooks, err = a.newWebhooks(); err != nil {
		return nil, err
	}
	if strings.Contains(a.watchNS, ",") {
		mgr.AddReadyzReport(a.namespacesReport)
	}
	if opts.WaitForKinds {
		mgr.AddReadyzReport(a.kindsReport)
	}
	return a, nil
}

// namespaceSet checks Options.Namespace and Namespaces and returns the
// namespace the App's informers take; one of Namespaces becomes Namespace.
func namespaceSet(opts *Options) (string, error) {
	if len(opts.Namespaces) == 0 {
		return opts.Namespace, nil
	}
	if opts.Namespace != "" {
		return "", fmt.Errorf("kloop.New: Namespace %q and Namespaces %q: set one of them (Namespaces with one namespace is Namespace)", opts.Namespace, opts.Namespaces)
	}
	set := slices.Clone(opts.Namespaces)
	for _, ns := range set {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return "", fmt.Errorf("kloop.New: Namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) == 1 {
		opts.Namespace, opts.Namespaces = set[0], nil
		return set[0], nil
	}
	opts.Namespaces = set
	return strings.Join(set, ","), nil
}

// namespacesReport is the /readyz report of Options.Namespaces: each
// informer that leaves a namespace out, with why. A namespace that cannot
// be listed does not make the App unready: the others are served, and it
// may yet be created or granted.
func (a *App) namespacesReport() string {
	a.mu.Lock()
	f := a.factory
	a.mu.Unlock()
	var b strings.Builder
	if f != nil {
		for _, st := range f.Status() {
			if strings.Contains(st.Scope.Namespace, ",") && st.Source.LastError != nil {
				fmt.Fprintf(&b, "  %s: %v\n", st.Name, st.Source.LastError)
			}
		}
	}
	if b.Len() == 0 {
		return "namespaces " + a.watchNS + ": every one served\n"
	}
	return "namespaces " + a.watchNS + ": some not served (retried; the others are served):\n" + b.String()
}

// addrOn reports whether an address option asks for a server ("" and "0"
// mean off).
func addrOn(addr string) bool { return addr != "" && addr != "0" }

// Debug returns the debug page's server (Options.DebugAddr), nil when it
// is off. Once Run has bound it, its URL is the page's address.
func (a *App) Debug() *debug.Server { return a.debug }

// leaseNamespace is where the App's Leases go: ns when set, else
// Options.Namespace, else the pod's own namespace in a cluster; "" when
// none is known.
func (a *App) leaseNamespace(ns string) string {
	if ns == "" {
		ns = a.opts.Namespace
	}
	if ns == "" {
		ns = podNamespace()
	}
	return ns
}

// podNamespace is the pod's own namespace in a cluster, else "".
func podNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

func (a *App) newElector(le LeaderElection) (*leaderelection.Elector, error) {
	ns := a.leaseNamespace(le.Namespace)
	if ns == "" {
		return nil, errors.New("kloop.New: leader election needs the namespace of its Lease: set LeaderElection.Namespace (--leader-elect-namespace); it defaults to Options.Namespace, or the pod's namespace in a cluster")
	}
	id := le.ID
	if id == "" {
		id = a.opts.Name + "-leader"
	}
	el, err := leaderelection.New(a.cfg, leaderelection.Options{
		Namespace:     ns,
		Name:          id,
		Identity:      le.Identity,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		Logger:        a.log,
		Registerer:    a.opts.Registry,
	})
	if err != nil {
		return nil, fmt.Errorf("kloop.New: leader election: %w", err)
	}
	return el, nil
}

// Config is the rest.Config given to New: the App's cluster.
func (a *App) Config() *rest.Config { return a.cfg }

// Options returns the App's options with their defaults filled in.
func (a *App) Options() Options { return a.opts }

// Logger is the App's logger, given once in Options.
func (a *App) Logger() *slog.Logger { return a.log }

// Manager is the App's manager, for health and readiness checks of your
// own. Run starts it; do not start it yourself.
func (a *App) Manager() *manager.Manager { return a.mgr }

// Factory returns the App's informer factory, made on first use. Informers
// asked of it are started by Run; an informer added while Run runs starts
// at once.
func (a *App) Factory() *informer.Factory {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.factoryLocked()
}

func (a *App) factoryLocked() *informer.Factory {
	if a.factory == nil {
		fopts := informer.FactoryOptions{
			Scheme:     a.opts.Scheme,
			Logger:     a.log,
			Registerer: a.opts.Registry,
			Memory:     a.opts.Memory,
		}
		if fopts.Memory.EncodedUnder > 0 && fopts.Memory.Budget == 0 {
			// The budget is the Go memory limit Run will set.
			if d := memlimit.Decide(a.opts.MemoryLimit, os.Getenv, os.DirFS("/")); d.Limit > 0 {
				fopts.Memory.Budget = d.Limit
			}
		}
		if a.member != nil {
			fopts.Restrict = a.shardInformer
		}
		if a.opts.WaitForKinds {
			fopts.WaitFor = a.gateOf
		}
		a.factory = informer.NewFactory(a.cfg, fopts)
	}
	return a.factory
}

// waitForInformers returns once every informer the App holds has synced
// (see informer.Factory.WaitForSync), or with an error naming each that
// has not: what a controller waits for before its first reconcile.
func (a *App) waitForInformers(ctx context.Context) error {
	a.mu.Lock()
	f := a.factory
	a.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.WaitForSync(ctx)
}

// Client returns the App's client: every write of the App goes through it,
// with Options.Name as the field manager, and it tracks those writes so
// that cached reads (Objects) see them.
func (a *App) Client() *client.Client { return a.client }

// Recorder returns the App's event recorder, whose events name
// Options.Name as their source. Run always runs it (it costs one idle
// goroutine), so no event is dropped for want of a started recorder, even
// when it is first asked for inside a reconcile.
func (a *App) Recorder() *record.Recorder { return a.recorder }

// resourceOf finds the resource serving gvk, and whether it is namespaced,
// through discovery of gvk's group and version alone (one request, whose
// answer is kept; a kind it does not list makes the next call ask again,
// for a CRD installed after the start). Called with a.mu held.
func (a *App) resourceOfLocked(gvk schema.GroupVersionKind) (_ schema.GroupVersionResource, namespaced bool, _ error) {
	gv := gvk.GroupVersion()
	find := func(l *metav1.APIResourceList) (metav1.APIResource, bool) {
		if l == nil {
			return metav1.APIResource{}, false
		}
		for _, r := range l.APIResources {
			if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
				return r, true
			}
		}
		return metav1.APIResource{}, false
	}
	l := a.resources[gv]
	if _, found := find(l); !found {
		if a.discovery == nil {
			disc, err := discovery.NewDiscoveryClientForConfig(a.cfg)
			if err != nil {
				return schema.GroupVersionResource{}, false, fmt.Errorf("kloop: discovery: %w", err)
			}
			a.discovery = disc
		}
		fetched, err := a.discovery.ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			fetched, err = &metav1.APIResourceList{GroupVersion: gv.String()}, nil
		}
		if err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		if a.resources == nil {
			a.resources = map[schema.GroupVersion]*metav1.APIResourceList{}
		}
		l = kindsOf(fetched)
		a.resources[gv] = l
	}
	r, found := find(l)
	if !found {
		return schema.GroupVersionResource{}, false, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return gv.WithResource(r.Name), r.Namespaced, nil
}

// kindsOf keeps of a discovery list what resourceOfLocked reads: each
// resource's name, kind and scope, without subresources, verbs and short
// names, so that an App (one per cluster in a fleet) does not hold the
// whole list.
func kindsOf(l *metav1.APIResourceList) *metav1.APIResourceList {
	out := &metav1.APIResourceList{GroupVersion: l.GroupVersion}
	for _, r := range l.APIResources {
		if !strings.Contains(r.Name, "/") {
			out.APIResources = append(out.APIResources, metav1.APIResource{Name: r.Name, Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	return out
}

// Add adds a runnable of your own (a server, a periodic job) to be run by
// Run like the App's own. Without leader election it runs at once; with it,
// only on the leader unless it has a method NeedLeaderElection() bool that
// returns false.
func (a *App) Add(r manager.Runnable) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		a.errs = append(a.errs, errors.New("kloop: Add after Run: add runnables before Run"))
		return
	}
	a.runnables = append(a.runnables, r)
}

// AddGatherer adds metrics for /metrics to serve beside the App's
// Options.Registry, such as the registries of Apps that this one runs.
// g is gathered on each request; it may be called before or during Run.
func (a *App) AddGatherer(g prometheus.Gatherer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gatherers = append(a.gatherers, g)
}

func (a *App) gatherMore() ([]*dto.MetricFamily, error) {
	a.mu.Lock()
	gs := prometheus.Gatherers(slices.Clone(a.gatherers))
	a.mu.Unlock()
	return gs.Gather()
}

// fail records a declaration error, returned by Run; a handle without an
// App (Unavailable) has nowhere to record it.
func (a *App) fail(err error) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.errs = append(a.errs, err)
	a.mu.Unlock()
}

// Run makes an App from cfg and opts, lets each setup declare what it
// holds (handles, controllers), and runs it until ctx is done: New, the
// setups and App.Run in one call, for a program's main or a sample's Run.
// It returns the first error of New or of a setup without starting
// anything, else what App.Run returns.
func Run(ctx context.Context, cfg *rest.Config, opts Options, setup ...func(*App) error) error {
	app, err := New(cfg, opts)
	if err != nil {
		return err
	}
	for _, s := range setup {
		if err := s(app); err != nil {
			return err
		}
	}
	return app.Run(ctx)
}

// Err returns the declaration errors so far, joined, or nil.
func (a *App) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.errs...)
}

// Run starts everything the App holds and blocks until ctx is done and
// everything has stopped (within Options.ShutdownTimeout): the informers
// (on every replica), the event recorder, the webhook server (on every
// replica), the controllers (with leader election, only while this replica
// leads) and the runnables added with Add. It returns nil after a clean stop through ctx. If a declaration
// failed it starts nothing and returns every declaration error.
func (a *App) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return manager.ErrAlreadyStarted
	}
	a.started = true
	if err := errors.Join(a.errs...); err != nil {
		a.mu.Unlock()
		if a.webhooks != nil && a.webhooks.local != nil {
			_ = a.webhooks.local.Close() // its temporary certificates
		}
		if a.webhooks != nil && a.webhooks.self != nil {
			_ = a.webhooks.self.Close()
		}
		return err
	}
	a.closeReadyLocked()
	// The factory runs even without informers yet, so that one asked for
	// while Run runs (a kind named at run time) starts at once.
	runs := []manager.Runnable{a.factoryLocked(), a.recorder}
	if a.opts.WaitForKinds {
		runs = append(runs, kindsRunnable{a})
	}
	if a.webhooks != nil {
		runs = append(runs, a.webhooks.runnable(a))
	}
	runs = append(runs, a.runnables...)
	a.mu.Unlock()
	for _, r := range runs {
		if err := a.mgr.Add(r); err != nil {
			return err
		}
	}
	a.log.Info("Starting "+a.opts.Name, "namespace", a.watchNS)
	setMemoryLimit(a.opts.MemoryLimit, a.log)
	err := a.mgr.Start(ctx)
	a.stopTraces()
	a.log.Info("Stopped "+a.opts.Name, "err", err)
	return err
}

// Ready is closed once every controller declared before Run runs: its
// sources and the App's informers have synced, its queue holds the
// starting state (an initial add, marked Replay, for each object) and its
// workers have started. A change made after Ready reaches the controllers
// as a change of its own, not folded into the initial list: what a test
// waits for before it changes what the controllers watch. An App without
// controllers is ready once Run starts. With leader election it closes
// on the leader only, when it leads; it never closes when a controller
// fails to start (Run returns that error).
func (a *App) Ready() <-chan struct{} { return a.ready }

// controllerStarted counts one more controller running, for Ready.
func (a *App) controllerStarted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.controllers--
	a.closeReadyLocked()
}

func (a *App) closeReadyLocked() {
	if a.started && a.controllers <= 0 && !a.readyClosed {
		a.readyClosed = true
		close(a.ready)
	}
}

// traceFlushTimeout bounds how long a stop waits to send the last spans.
const traceFlushTimeout = 5 * time.Second

// stopTraces sends the spans still queued, giving up after
// traceFlushTimeout (a receiver that does not answer must not hold the
// stop), and stops the exporter.
func (a *App) stopTraces() {
	tp, ok := a.opts.Traces.(interface{ Shutdown(context.Context) error })
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		a.log.Warn("Traces: the last spans were not all sent", "err", err)
	}
}

// setMemoryLimit applies Options.MemoryLimit (see memlimit.Decide) and
// logs what the limit is and why.
func setMemoryLimit(explicit int64, log *slog.Logger) {
	d := memlimit.Decide(explicit, os.Getenv, os.DirFS("/"))
	memlimit.Record(d) // for the debug page
	if d.Limit > 0 {
		runtimedebug.SetMemoryLimit(d.Limit)
		log.Info("Go memory limit set", "bytes", d.Limit, "why", d.Why)
		return
	}
	log.Info("Go memory limit left as it is", "bytes", runtimedebug.SetMemoryLimit(-1), "why", d.Why)
}
