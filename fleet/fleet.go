package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	spec "github.com/kloop-dev/kloop/internal/fleet"
	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/record"
	"github.com/kloop-dev/kloop/sharding"
)

// Options say where a fleet's clusters come from and how they are
// joined. Clusters come from three places, any of them together; a name
// given twice keeps the first (Home, then the directory, then Secrets).
type Options struct {
	// Home, if set, makes the App's own cluster (the rest.Config given to
	// kloop.New) a member under this name.
	Home string

	// KubeconfigDir is a directory of kubeconfig files, one cluster per
	// file, named after the file without its extension (.kubeconfig,
	// .yaml, .yml, .conf, .config), at the file's current-context. It is
	// read again every few seconds: a file added joins its cluster, a file
	// removed lets it leave, a file changed joins it again. A mounted
	// Secret or ConfigMap works (hidden files are skipped).
	KubeconfigDir string

	// SecretSelector, if set, is a label selector (such as
	// "kloop.dev/cluster=true") of kubeconfig Secrets in SecretNamespace of
	// the home cluster, one cluster per Secret, named after the Secret:
	// the kubeconfig is the data key "kubeconfig" (else "value", as in
	// Cluster API's Secrets), at the context named by the annotation
	// kloop.dev/kubeconfig-context, else its current-context. Such a
	// kubeconfig may not run commands (exec, auth-provider) or name local
	// files. Creating, changing and deleting a Secret joins, joins again
	// and lets go of its cluster. The App needs list and watch on Secrets
	// there.
	SecretSelector string
	// SecretNamespace is where the kubeconfig Secrets are. Default: the
	// App's Options.Namespace, else the pod's own namespace in a cluster.
	SecretNamespace string

	// RequireAll makes /readyz fail while any cluster is not joined. By
	// default the App is ready once every cluster known at the start has
	// either synced its caches or failed once (failures are listed in
	// /readyz?verbose); clusters that join, fail or leave later do not
	// change readiness.
	RequireAll bool

	// SyncTimeout bounds how long a joining cluster's caches may take to
	// sync before the attempt counts as failed. Default 30s.
	SyncTimeout time.Duration
	// RetryMax is the longest wait between attempts to join a failing
	// cluster; waits start at one second and double. Default 1m.
	RetryMax time.Duration
}

// Key is the key of a fleet controller (NewController): the cluster's
// name in the fleet and the object's key in it.
type Key struct {
	Cluster string
	cache.Key
}

// String is "cluster/namespace/name" ("cluster/name" for a cluster-scoped
// object).
func (k Key) String() string { return k.Cluster + "/" + k.Key.String() }

// States of a member of the fleet.
const (
	stateJoining = "joining" // connecting, discovering kinds, syncing caches
	stateJoined  = "joined"  // caches synced; its keys flow
	stateFailed  = "failed"  // the last attempt failed; retried with back-off until one succeeds
	stateInvalid = "invalid" // its definition cannot be used; fixed by changing it
)

const (
	defaultSyncTimeout  = 30 * time.Second
	defaultRetryMax     = time.Minute
	retryInitial        = time.Second
	probeTimeout        = 10 * time.Second
	clusterWriteTimeout = 30 * time.Second
)

// dirInterval is how often Options.KubeconfigDir is read again.
var dirInterval = 2 * time.Second

// serviceAccountNamespaceFile holds the namespace of a pod's service
// account, the default of Options.SecretNamespace in a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Fleet runs an App's controllers over many clusters: each cluster gets an
// App of its own (informers, client, event recorder), made when it joins
// and stopped when it leaves, which the fleet App runs. New makes one.
type Fleet struct {
	app     *kloop.App
	opts    Options
	secrets *informer.Informer[*corev1.Secret] // nil without SecretSelector
	wake    chan struct{}
	metrics struct {
		joined   *prometheus.GaugeVec   // cluster
		failures *prometheus.CounterVec // cluster
	}

	mu        sync.Mutex
	started   bool
	decls     []declaration // the fleet handles, made in each cluster's App as it joins
	members   map[string]*member
	subs      []*subscription
	reported  map[string]bool // duplicate names reported (name and origin), once each
	tried     chan struct{}   // closed once the first pass has tried every cluster
	triedOnce bool
	waiting   int // members of the first pass not yet tried
	firstPass bool
}

// declaration is a fleet handle as the fleet sees it: made in a cluster's
// App before the App runs, and dropped once the App has stopped.
type declaration interface {
	add(m *member) error
	drop(m *member)
}

// member is one cluster of the fleet.
type member struct {
	name   string
	spec   spec.Spec
	cancel context.CancelFunc // nil for an invalid one
	done   chan struct{}
	app    *kloop.App           // the cluster's App, during an attempt
	reg    *prometheus.Registry // its metrics

	// under Fleet.mu
	state    string
	err      error
	since    time.Time
	failures int
	tried    bool
	first    bool // known at the start: the fleet is ready once it is tried
	joined   bool // caches synced; In and Cluster answer, keys flow
	subs     map[*subscription]controller.Subscription
}

// New makes app run over a fleet of clusters, before app.Run: declare its
// kinds with Objects and its controllers with NewController; app.Run runs
// the clusters with the rest. app's own Objects and controllers stay in
// its own cluster. The fleet's metrics, its /readyz check and report, and
// its clusters on the debug page are app's. A sharded app (Sharding, by
// namespace) splits every cluster between its replicas.
func New(app *kloop.App, opts Options) (*Fleet, error) {
	if opts.Home != "" {
		if err := spec.CheckName(opts.Home); err != nil {
			return nil, fmt.Errorf("fleet.New: Options.Home: %w", err)
		}
	}
	if sh := app.Options().Sharding; sh != nil && sh.Key == sharding.ByUID {
		return nil, errors.New("fleet.New: the App is sharded by UID: a fleet is sharded by namespace (Sharding.Key ByNamespace, the default)")
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = defaultSyncTimeout
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = defaultRetryMax
	}
	f := &Fleet{app: app, opts: opts, wake: make(chan struct{}, 1), members: map[string]*member{}, reported: map[string]bool{}, tried: make(chan struct{})}
	r := kmetrics.NewRegistrar(app.Options().Registry)
	f.metrics.joined = r.GaugeVec(prometheus.GaugeOpts{Namespace: "kloop", Subsystem: "fleet", Name: "cluster_joined",
		Help: "1 while the cluster is joined (caches synced, keys flowing), else 0: joining, failed (retried) or invalid (its kubeconfig cannot be used)."}, "cluster")
	f.metrics.failures = r.CounterVec(prometheus.CounterOpts{Namespace: "kloop", Subsystem: "fleet", Name: "cluster_failures_total",
		Help: "Failed attempts to join the cluster, and definitions of it that could not be used."}, "cluster")
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("fleet.New: metrics: %w", err)
	}
	if opts.SecretSelector != "" {
		ns := opts.SecretNamespace
		if ns == "" {
			ns = app.Options().Namespace
		}
		if ns == "" {
			if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
				ns = strings.TrimSpace(string(b))
			}
		}
		if ns == "" {
			return nil, errors.New("fleet.New: Options.SecretSelector needs the Secrets' namespace: set Options.SecretNamespace (it defaults to the App's Namespace, or the pod's namespace in a cluster)")
		}
		inf, err := informer.Of[*corev1.Secret](app.Factory(), informer.Scope{Namespace: ns, LabelSelector: opts.SecretSelector})
		if err != nil {
			return nil, fmt.Errorf("fleet.New: Options.SecretSelector: %w", err)
		}
		if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.Secret]{
			AddFunc:    func(*corev1.Secret, bool) { f.poke() },
			UpdateFunc: func(_, _ *corev1.Secret) { f.poke() },
			DeleteFunc: func(*corev1.Secret, bool) { f.poke() },
		}, informer.HandlerOptions{Name: "fleet", Inline: true}); err != nil {
			return nil, fmt.Errorf("fleet.New: Options.SecretSelector: %w", err)
		}
		f.secrets = inf
	}
	app.Add(runner{f})
	app.AddGatherer(prometheus.GathererFunc(f.gather))
	app.Manager().AddReadyzCheck("fleet", f.readyCheck)
	app.Manager().AddReadyzReport(f.report)
	return f, nil
}

// Cluster returns the App of the fleet's cluster named name while it is
// joined (its caches synced), else nil: its Client, Recorder and Logger
// act in that cluster, for a fleet controller's reconcile. The fleet runs
// it.
func (f *Fleet) Cluster(name string) *kloop.App {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.members[name]; m != nil && m.joined {
		return m.app
	}
	return nil
}

// joinedLocked is the member named name while it is joined, else nil.
func (f *Fleet) joinedLocked(name string) *member {
	if m := f.members[name]; m != nil && m.joined {
		return m
	}
	return nil
}

// declare adds a fleet handle, before Run.
func (f *Fleet) declare(d declaration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("declared after Run: a fleet's kinds are declared before Run")
	}
	f.decls = append(f.decls, d)
	return nil
}

func (f *Fleet) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// runner is the fleet as the App runs it: a cache of the manager's, ready
// once the clusters known at the start have been tried.
type runner struct{ f *Fleet }

// NeedLeaderElection is false: clusters are joined on every replica, so a
// standby's caches are warm.
func (runner) NeedLeaderElection() bool { return false }

// WaitForSync waits until every cluster known at the start has been tried
// once: joined, failed or found invalid.
func (r runner) WaitForSync(ctx context.Context) error {
	select {
	case <-r.f.tried:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("fleet: clusters not yet tried: %s: %w", strings.Join(r.f.pending(), ", "), ctx.Err())
	}
}

// Clusters is the fleet's state for the debug page, by name.
func (r runner) Clusters() []debug.ClusterStatus { return r.f.status() }

// Start runs the fleet until ctx is done: it reads the clusters'
// definitions whenever they may have changed, joins new clusters, lets go
// of removed ones and joins changed ones again. Once ctx is done every
// cluster leaves.
func (r runner) Start(ctx context.Context) error {
	f := r.f
	f.mu.Lock()
	f.started = true
	f.mu.Unlock()
	if f.secrets != nil {
		if err := f.secrets.WaitForSync(ctx); err != nil && ctx.Err() == nil {
			f.app.Logger().Error("Fleet: kubeconfig Secrets not listed; going on without them until they are", "err", err)
		}
	}
	var tick <-chan time.Time
	if f.opts.KubeconfigDir != "" {
		t := time.NewTicker(dirInterval)
		defer t.Stop()
		tick = t.C
	}
	defer f.leaveAll()
	for {
		f.update(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		case <-tick:
		}
	}
}

func (f *Fleet) pending() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, m := range f.members {
		if !m.tried {
			names = append(names, m.name)
		}
	}
	sort.Strings(names)
	return names
}

// specs reads every definition, in order of precedence.
func (f *Fleet) specs() []spec.Spec {
	var specs []spec.Spec
	if f.opts.Home != "" {
		specs = append(specs, spec.Home(f.opts.Home, f.app.Config()))
	}
	if f.opts.KubeconfigDir != "" {
		dir, err := spec.ReadDir(f.opts.KubeconfigDir)
		if err != nil {
			f.app.Logger().Error("Fleet: cannot read the kubeconfig directory; keeping its clusters", "dir", f.opts.KubeconfigDir, "err", err)
			f.mu.Lock()
			for _, m := range f.members {
				if strings.HasPrefix(m.spec.Origin, "file ") {
					specs = append(specs, m.spec)
				}
			}
			f.mu.Unlock()
		}
		specs = append(specs, dir...)
	}
	if f.secrets != nil {
		secrets := f.secrets.Lister().List(nil)
		slices.SortFunc(secrets, func(a, b *corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
		for _, s := range secrets {
			specs = append(specs, spec.FromSecret(s))
		}
	}
	return specs
}

// update brings the members in line with the definitions.
func (f *Fleet) update(ctx context.Context) {
	want := map[string]spec.Spec{}
	for _, sp := range f.specs() {
		if prev, dup := want[sp.Name]; dup {
			if id := sp.Name + "\x00" + sp.Origin + "\x00" + sp.Fingerprint; prev.Origin != sp.Origin && !f.reported[id] {
				f.reported[id] = true
				f.reportSpec(sp, fmt.Errorf("cluster name %q is taken by %s: rename one of them", sp.Name, prev.Origin))
			}
			continue
		}
		want[sp.Name] = sp
	}
	f.mu.Lock()
	var leave []*member
	for name, m := range f.members {
		if sp, ok := want[name]; !ok || sp.Fingerprint != m.spec.Fingerprint || sp.Origin != m.spec.Origin {
			leave = append(leave, m)
		}
	}
	f.mu.Unlock()
	for _, m := range leave {
		f.leave(m)
	}
	f.mu.Lock()
	first := !f.firstPass
	f.firstPass = true
	for name, sp := range want {
		if _, ok := f.members[name]; ok {
			continue
		}
		m := &member{name: name, spec: sp, done: make(chan struct{}), since: time.Now(), state: stateJoining}
		f.members[name] = m
		f.metrics.joined.WithLabelValues(name).Set(0)
		m.first = first
		if first {
			f.waiting++
		}
		if sp.Err != nil {
			m.state, m.err = stateInvalid, sp.Err
			f.markTriedLocked(m)
			close(m.done)
			f.metrics.failures.WithLabelValues(name).Inc()
			f.mu.Unlock()
			f.reportSpec(sp, sp.Err)
			f.mu.Lock()
			continue
		}
		var mctx context.Context
		mctx, m.cancel = context.WithCancel(ctx)
		f.app.Logger().Info("Fleet: cluster joining", "cluster", name, "from", sp.Origin)
		go f.run(mctx, m) // waited for by leave, through m.done
	}
	f.checkTriedLocked()
	f.mu.Unlock()
}

// reportSpec reports a definition that cannot be used: a log line, and an
// Event on its Secret.
func (f *Fleet) reportSpec(sp spec.Spec, err error) {
	f.app.Logger().Error("Fleet: cluster definition cannot be used", "cluster", sp.Name, "from", sp.Origin, "err", err)
	if sp.Secret != nil {
		f.app.Recorder().Event(sp.Secret, record.Warning, "KubeconfigInvalid", fmt.Sprintf("cluster %s: %v", sp.Name, err))
	}
}

func (f *Fleet) checkTriedLocked() {
	if f.firstPass && f.waiting == 0 && !f.triedOnce {
		f.triedOnce = true
		close(f.tried)
	}
}

func (f *Fleet) markTriedLocked(m *member) {
	if !m.tried {
		m.tried = true
		if m.first {
			f.waiting--
		}
		f.checkTriedLocked()
	}
}

// leave stops a member and waits until its App, informers, recorder and
// connections are gone.
func (f *Fleet) leave(m *member) {
	if m.cancel != nil {
		m.cancel()
	}
	<-m.done
	f.mu.Lock()
	if f.members[m.name] == m {
		delete(f.members, m.name)
	}
	f.markTriedLocked(m)
	f.mu.Unlock()
	f.metrics.joined.DeleteLabelValues(m.name)
	f.metrics.failures.DeleteLabelValues(m.name)
	f.app.Logger().Info("Fleet: cluster left", "cluster", m.name)
}

func (f *Fleet) leaveAll() {
	f.mu.Lock()
	ms := make([]*member, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	f.mu.Unlock()
	for _, m := range ms {
		if m.cancel != nil {
			m.cancel()
		}
	}
	for _, m := range ms {
		f.leave(m)
	}
}

// run joins the member, serves it until ctx is done, and tries again
// after a back-off when an attempt fails.
func (f *Fleet) run(ctx context.Context, m *member) {
	defer close(m.done)
	for {
		err := f.serve(ctx, m)
		if ctx.Err() != nil {
			return
		}
		err = spec.Explain(err)
		f.mu.Lock()
		m.failures++
		m.state, m.err, m.since = stateFailed, err, time.Now()
		wait := spec.Backoff(m.failures, retryInitial, f.opts.RetryMax)
		f.markTriedLocked(m)
		f.mu.Unlock()
		f.metrics.failures.WithLabelValues(m.name).Inc()
		f.app.Logger().Error("Fleet: cluster not joined; retrying", "cluster", m.name, "err", err, "retryIn", wait)
		if m.spec.Secret != nil {
			f.app.Recorder().Event(m.spec.Secret, record.Warning, "ClusterUnavailable", fmt.Sprintf("cluster %s: %v", m.name, err))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C: // still "failed" until an attempt succeeds
		}
	}
}

// serve makes the cluster's App, checks that the cluster answers, makes
// the fleet's handles in it, runs it, waits for its caches, then
// subscribes the fleet's controllers to it until ctx is done. It returns
// why an attempt failed, or nil once ctx is done; either way the App has
// stopped.
func (f *Fleet) serve(ctx context.Context, m *member) error {
	dialer := &spec.Dialer{}
	defer dialer.Close()
	cfg := rest.CopyConfig(m.spec.Config)
	cfg.Dial, cfg.WrapTransport = dialer.Dial, dialer.Share(cfg.WrapTransport) // one connection for all of the cluster's clients
	// left is closed once the App's informers have stopped, or will never
	// start: the shard group member then forgets them.
	left := make(chan struct{})
	defer close(left)
	if err := f.clusterApp(m, cfg, left); err != nil {
		return err
	}
	defer func() {
		f.mu.Lock()
		m.app, m.reg = nil, nil
		f.mu.Unlock()
	}()
	if err := probe(ctx, cfg); err != nil {
		return err
	}
	f.mu.Lock()
	decls := slices.Clone(f.decls)
	f.mu.Unlock()
	defer func() {
		for _, d := range decls {
			d.drop(m)
		}
	}()
	for _, d := range decls {
		if err := d.add(m); err != nil {
			return err
		}
	}
	// The App runs on this goroutine; a short-lived one waits for its
	// caches and joins, and leaving (ctx done) unjoins, then stops the App.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	syncCtx, stopSync := context.WithTimeout(ctx, f.opts.SyncTimeout)
	defer stopSync()
	var synced error
	var unjoinLater func() bool
	joiner := make(chan struct{})
	go func() {
		defer close(joiner)
		if synced = m.app.Factory().WaitForSync(syncCtx); synced != nil || ctx.Err() != nil {
			stopRun()
			return
		}
		f.join(m)
		unjoinLater = context.AfterFunc(ctx, func() {
			f.unjoin(m)
			stopRun()
		})
	}()
	ran := m.app.Run(runCtx)
	stopSync()
	<-joiner
	if unjoinLater != nil && unjoinLater() {
		f.unjoin(m) // the App stopped on its own
	}
	switch {
	case ctx.Err() != nil:
		return nil
	case ran != nil:
		return fmt.Errorf("the cluster's App stopped: %w", ran)
	case synced != nil:
		return fmt.Errorf("caches did not sync within %v: %w", f.opts.SyncTimeout, synced)
	}
	return errors.New("the cluster's App stopped")
}

// clusterApp makes the App of one cluster: the fleet App's name, scheme,
// namespaces, clock, memory options and tracers, a logger that names the cluster,
// a metrics registry of its own (dropped with it), and its share of the
// fleet App's shards.
func (f *Fleet) clusterApp(m *member, cfg *rest.Config, left <-chan struct{}) error {
	o := f.app.Options()
	reg := prometheus.NewRegistry()
	f.mu.Lock()
	m.reg = reg
	f.mu.Unlock()
	opts := kloop.Options{
		Name: o.Name, Scheme: o.Scheme, Namespace: o.Namespace, Namespaces: o.Namespaces,
		Logger: f.app.Logger().With("cluster", m.name), Registry: reg, Clock: o.Clock,
		ShutdownTimeout: o.ShutdownTimeout, MemoryLimit: o.MemoryLimit, Memory: o.Memory,
		// A write to a cluster that stopped answering gives up, so a
		// reconcile of it does not hold a worker the other clusters' keys
		// need.
		ClientTimeout: clusterWriteTimeout,
	}
	if o.Traces != nil {
		// The fleet App's tracers, without its Shutdown: the fleet App
		// sends the last spans when it stops, not a cluster that leaves.
		opts.Traces = struct{ trace.TracerProvider }{o.Traces}
	}
	if mem := f.app.Member(); mem != nil {
		opts.ShardOf = &kloop.ShardOf{Member: mem, Cluster: m.name, Left: left}
	}
	app, err := kloop.New(cfg, opts)
	f.mu.Lock()
	m.app = app
	f.mu.Unlock()
	return err
}

// probe asks the cluster for its version, so that an unreachable server, a
// CA that does not match or refused credentials show at once, not as
// informers that never sync.
func probe(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = probeTimeout
	hc, err := rest.HTTPClientFor(c) // the cluster's shared transport: its connection serves the informers next
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(c, hc)
	if err != nil {
		return err
	}
	if _, err := dc.RESTClient().Get().AbsPath("/version").DoRaw(ctx); err != nil {
		return fmt.Errorf("cannot reach the API server at %s: %w", cfg.Host, err)
	}
	return nil
}

// join marks the member joined and subscribes every fleet source to it.
func (f *Fleet) join(m *member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m.joined, m.subs = true, map[*subscription]controller.Subscription{}
	m.state, m.err, m.failures, m.since = stateJoined, nil, 0, time.Now()
	f.markTriedLocked(m)
	for _, s := range f.subs {
		f.attachLocked(m, s)
	}
	f.metrics.joined.WithLabelValues(m.name).Set(1)
	f.app.Logger().Info("Fleet: cluster joined", "cluster", m.name)
}

// unjoin ends the member's subscriptions and waits until none enqueues.
func (f *Fleet) unjoin(m *member) {
	f.mu.Lock()
	subs := m.subs
	m.joined, m.subs = false, nil
	if m.state == stateJoined {
		m.state, m.since = stateJoining, time.Now()
	}
	f.mu.Unlock()
	f.metrics.joined.WithLabelValues(m.name).Set(0)
	for _, s := range subs {
		s.Remove()
	}
	for _, s := range subs {
		<-s.Done()
	}
}

// gather gathers the joined clusters' registries (their informers' and
// recorders' metrics), each series labelled with its cluster, for the
// App's /metrics.
func (f *Fleet) gather() ([]*dto.MetricFamily, error) {
	regs := map[string]prometheus.Gatherer{}
	f.mu.Lock()
	for _, m := range f.members {
		if m.joined {
			regs[m.name] = m.reg
		}
	}
	f.mu.Unlock()
	return kmetrics.Labelled("cluster", regs)
}

func (f *Fleet) status() []debug.ClusterStatus {
	f.mu.Lock()
	out := make([]debug.ClusterStatus, 0, len(f.members))
	var factories []*informer.Factory
	for _, m := range f.members {
		var fac *informer.Factory
		if m.joined {
			fac = m.app.Factory()
		}
		out = append(out, debug.ClusterStatus{Name: m.name, Origin: m.spec.Origin, State: m.state, Since: m.since, Err: m.err})
		factories = append(factories, fac)
	}
	f.mu.Unlock()
	for i, fac := range factories {
		if fac == nil {
			continue
		}
		for _, is := range fac.Status() {
			out[i].Objects += is.Objects
			if is.Source.LastError != nil && out[i].Err == nil {
				out[i].Err = fmt.Errorf("%s: %w", is.Name, spec.Explain(is.Source.LastError))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// readyCheck is /readyz's "fleet" check (see Options.RequireAll).
func (f *Fleet) readyCheck(*http.Request) error {
	select {
	case <-f.tried:
	default:
		return fmt.Errorf("clusters not yet tried: %s", strings.Join(f.pending(), ", "))
	}
	if !f.opts.RequireAll {
		return nil
	}
	var not []string
	for _, st := range f.status() {
		if st.State != stateJoined {
			not = append(not, st.Name+" ("+st.State+")")
		}
	}
	if len(not) > 0 {
		return fmt.Errorf("clusters not joined: %s", strings.Join(not, ", "))
	}
	return nil
}

// report is the fleet's table in /readyz?verbose.
func (f *Fleet) report() string {
	var b strings.Builder
	b.WriteString("fleet:\n")
	for _, st := range f.status() {
		fmt.Fprintf(&b, "  %s: %s since %s, %d objects, from %s", st.Name, st.State, st.Since.UTC().Format(time.RFC3339), st.Objects, st.Origin)
		if st.Err != nil {
			fmt.Fprintf(&b, ": %v", st.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
