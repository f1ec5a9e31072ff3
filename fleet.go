package kloop

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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	fleetspec "github.com/kloop-dev/kloop/internal/fleet"
	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/record"
	"github.com/kloop-dev/kloop/sharding"
)

// Fleet configures an App that runs its controllers over many clusters
// (Options.Fleet). Each cluster gets informers, a client and an event
// recorder of its own, made when it joins and stopped when it leaves; a
// controller declared with NewFleetController reconciles the objects of
// every cluster, its keys naming the cluster (ClusterKey). Clusters come
// from three places, any of them together; a name given twice keeps the
// first (Home, then the directory, then Secrets).
//
// A cluster that cannot be joined (unreachable, credentials refused, a
// kind it does not serve, a kubeconfig that cannot be used) is reported
// (log, the kloop_fleet_* metrics, /readyz?verbose, the debug page, and an
// Event on its Secret) and tried again with back-off; the others go on.
type Fleet struct {
	// Home, if set, makes the App's own cluster (the rest.Config given to
	// New) a member under this name.
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
	// SecretNamespace is where the kubeconfig Secrets are. Default:
	// Options.Namespace, else the pod's own namespace in a cluster.
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

// ClusterKey is the key of a fleet controller (NewFleetController): the
// cluster's name in the fleet and the object's key in it.
type ClusterKey struct {
	Cluster string
	cache.Key
}

// String is "cluster/namespace/name" ("cluster/name" for a cluster-scoped
// object).
func (k ClusterKey) String() string { return k.Cluster + "/" + k.Key.String() }

// Cluster returns the App of the fleet's cluster named name while it is
// joined (its caches synced), else nil: its Client, Recorder, Config and
// Logger act in that cluster, for a fleet controller's reconcile. It is
// run by the fleet App: do not Run it.
func (a *App) Cluster(name string) *App {
	if a.fleet == nil {
		return nil
	}
	m := a.fleet.joined(name)
	if m == nil {
		return nil
	}
	return m.app
}

// States of a member of the fleet.
const (
	clusterJoining = "joining" // connecting, discovering kinds, syncing caches
	clusterJoined  = "joined"  // caches synced; its keys flow
	clusterFailed  = "failed"  // the last attempt failed; retried with back-off until one succeeds
	clusterInvalid = "invalid" // its definition cannot be used; fixed by changing it
)

const (
	defaultFleetSyncTimeout = 30 * time.Second
	defaultFleetRetryMax    = time.Minute
	fleetRetryInitial       = time.Second
	probeTimeout            = 10 * time.Second
	clusterWriteTimeout     = 30 * time.Second
)

// fleetDirInterval is how often Fleet.KubeconfigDir is read again.
var fleetDirInterval = 2 * time.Second

// fleet runs an App's clusters: it is the App's runnable (a manager Cache,
// ready once the clusters known at the start have been tried) and the
// registry fleet sources subscribe to.
type fleet struct {
	app     *App
	cfg     Fleet
	secrets *informer.Informer[*corev1.Secret] // nil without SecretSelector
	wake    chan struct{}
	decls   []func(*App) (any, error) // per Objects of the fleet App: a handle in a cluster App
	metrics fleetMetrics

	mu        sync.Mutex
	members   map[string]*member
	subs      []*fleetSub
	reported  map[string]bool // duplicate names reported (name and origin), once each
	tried     chan struct{}   // closed once the first pass has tried every cluster
	triedOnce bool
	waiting   int // members of the first pass not yet tried
	firstPass bool
}

// member is one cluster of the fleet.
type member struct {
	name   string
	spec   fleetspec.Spec
	cancel context.CancelFunc // nil for an invalid one
	done   chan struct{}

	// under fleet.mu
	state    string
	err      error
	since    time.Time
	failures int
	tried    bool
	first    bool  // known at the start: the fleet is ready once it is tried
	app      *App  // the cluster's App, while joined
	handles  []any // *Handle[T] per fleet.decls, while joined
	subs     map[*fleetSub]controller.Subscription
}

type fleetMetrics struct {
	joined   *prometheus.GaugeVec   // cluster
	failures *prometheus.CounterVec // cluster
}

func newFleet(a *App, cfg Fleet) (*fleet, error) {
	if cfg.Home != "" {
		if err := fleetspec.CheckName(cfg.Home); err != nil {
			return nil, fmt.Errorf("kloop.New: Fleet.Home: %w", err)
		}
	}
	if a.member != nil && a.opts.Sharding.Key == sharding.ByUID {
		return nil, errors.New("kloop.New: Sharding.Key ByUID with Options.Fleet: a fleet is sharded by namespace (ByNamespace, the default)")
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = defaultFleetSyncTimeout
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = defaultFleetRetryMax
	}
	f := &fleet{app: a, cfg: cfg, wake: make(chan struct{}, 1), members: map[string]*member{}, reported: map[string]bool{}, tried: make(chan struct{})}
	r := kmetrics.NewRegistrar(a.opts.Registry)
	f.metrics.joined = r.GaugeVec(prometheus.GaugeOpts{Namespace: "kloop", Subsystem: "fleet", Name: "cluster_joined",
		Help: "1 while the cluster is joined (caches synced, keys flowing), else 0: joining, failed (retried) or invalid (its kubeconfig cannot be used)."}, "cluster")
	f.metrics.failures = r.CounterVec(prometheus.CounterOpts{Namespace: "kloop", Subsystem: "fleet", Name: "cluster_failures_total",
		Help: "Failed attempts to join the cluster, and definitions of it that could not be used."}, "cluster")
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("kloop.New: fleet metrics: %w", err)
	}
	if cfg.SecretSelector != "" {
		ns := cfg.SecretNamespace
		if ns == "" {
			ns = a.leaseNamespace("")
		}
		if ns == "" {
			return nil, errors.New("kloop.New: Fleet.SecretSelector needs the Secrets' namespace: set Fleet.SecretNamespace (it defaults to Options.Namespace, or the pod's namespace in a cluster)")
		}
		inf, err := informer.Of[*corev1.Secret](a.Factory(), informer.Scope{Namespace: ns, LabelSelector: cfg.SecretSelector})
		if err != nil {
			return nil, fmt.Errorf("kloop.New: Fleet.SecretSelector: %w", err)
		}
		if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.Secret]{
			AddFunc:    func(*corev1.Secret, bool) { f.poke() },
			UpdateFunc: func(_, _ *corev1.Secret) { f.poke() },
			DeleteFunc: func(*corev1.Secret, bool) { f.poke() },
		}, informer.HandlerOptions{Name: "fleet", Inline: true}); err != nil {
			return nil, fmt.Errorf("kloop.New: Fleet.SecretSelector: %w", err)
		}
		f.secrets = inf
	}
	a.mgr.AddReadyzCheck("fleet", f.readyCheck)
	a.mgr.AddReadyzReport(f.report)
	return f, nil
}

func (f *fleet) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is false: clusters are joined on every replica, so a
// standby's caches are warm.
func (f *fleet) NeedLeaderElection() bool { return false }

// WaitForSync waits until every cluster known at the start has been tried
// once: joined, failed or found invalid.
func (f *fleet) WaitForSync(ctx context.Context) error {
	select {
	case <-f.tried:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("fleet: clusters not yet tried: %s: %w", strings.Join(f.pending(), ", "), ctx.Err())
	}
}

func (f *fleet) pending() []string {
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

// Start runs the fleet until ctx is done: it reads the clusters' definitions
// whenever they may have changed, joins new clusters, lets go of removed
// ones and joins changed ones again. Once ctx is done every cluster leaves.
func (f *fleet) Start(ctx context.Context) error {
	if f.secrets != nil {
		if err := f.secrets.WaitForSync(ctx); err != nil && ctx.Err() == nil {
			f.app.log.Error("Fleet: kubeconfig Secrets not listed; going on without them until they are", "err", err)
		}
	}
	var tick <-chan time.Time
	if f.cfg.KubeconfigDir != "" {
		t := time.NewTicker(fleetDirInterval)
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

// specs reads every definition, in order of precedence.
func (f *fleet) specs() []fleetspec.Spec {
	var specs []fleetspec.Spec
	if f.cfg.Home != "" {
		specs = append(specs, fleetspec.Home(f.cfg.Home, f.app.cfg))
	}
	if f.cfg.KubeconfigDir != "" {
		dir, err := fleetspec.ReadDir(f.cfg.KubeconfigDir)
		if err != nil {
			f.app.log.Error("Fleet: cannot read the kubeconfig directory; keeping its clusters", "dir", f.cfg.KubeconfigDir, "err", err)
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
			specs = append(specs, fleetspec.FromSecret(s))
		}
	}
	return specs
}

// update brings the members in line with the definitions.
func (f *fleet) update(ctx context.Context) {
	want := map[string]fleetspec.Spec{}
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
		m := &member{name: name, spec: sp, done: make(chan struct{}), since: time.Now(), state: clusterJoining}
		f.members[name] = m
		f.metrics.joined.WithLabelValues(name).Set(0)
		m.first = first
		if first {
			f.waiting++
		}
		if sp.Err != nil {
			m.state, m.err = clusterInvalid, sp.Err
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
		f.app.log.Info("Fleet: cluster joining", "cluster", name, "from", sp.Origin)
		go f.run(mctx, m) // waited for by leave, through m.done
	}
	f.checkTriedLocked()
	f.mu.Unlock()
}

// reportSpec reports a definition that cannot be used: a log line, and an
// Event on its Secret.
func (f *fleet) reportSpec(sp fleetspec.Spec, err error) {
	f.app.log.Error("Fleet: cluster definition cannot be used", "cluster", sp.Name, "from", sp.Origin, "err", err)
	if sp.Secret != nil {
		f.app.recorder.Event(sp.Secret, record.Warning, "KubeconfigInvalid", fmt.Sprintf("cluster %s: %v", sp.Name, err))
	}
}

func (f *fleet) checkTriedLocked() {
	if f.firstPass && f.waiting == 0 && !f.triedOnce {
		f.triedOnce = true
		close(f.tried)
	}
}

// leave stops a member and waits until its informers, recorder and
// connections are gone.
func (f *fleet) leave(m *member) {
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
	f.app.log.Info("Fleet: cluster left", "cluster", m.name)
}

func (f *fleet) leaveAll() {
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
func (f *fleet) run(ctx context.Context, m *member) {
	defer close(m.done)
	for {
		err := f.serve(ctx, m)
		if ctx.Err() != nil {
			return
		}
		err = fleetspec.Explain(err)
		f.mu.Lock()
		m.failures++
		m.state, m.err, m.since = clusterFailed, err, time.Now()
		wait := fleetspec.Backoff(m.failures, fleetRetryInitial, f.cfg.RetryMax)
		f.markTriedLocked(m)
		f.mu.Unlock()
		f.metrics.failures.WithLabelValues(m.name).Inc()
		f.app.log.Error("Fleet: cluster not joined; retrying", "cluster", m.name, "err", err, "retryIn", wait)
		if m.spec.Secret != nil {
			f.app.recorder.Event(m.spec.Secret, record.Warning, "ClusterUnavailable", fmt.Sprintf("cluster %s: %v", m.name, err))
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

func (f *fleet) markTriedLocked(m *member) {
	if !m.tried {
		m.tried = true
		if m.first {
			f.waiting--
		}
		f.checkTriedLocked()
	}
}

// serve makes the cluster's App, checks that the cluster answers, makes its
// handles, starts its informers and recorder, waits for its caches, then
// subscribes the fleet's controllers to it until ctx is done. It returns
// why an attempt failed, or nil once ctx is done; either way everything
// it started has stopped.
func (f *fleet) serve(ctx context.Context, m *member) error {
	dialer := &fleetspec.Dialer{}
	defer dialer.Close()
	cfg := rest.CopyConfig(m.spec.Config)
	cfg.Dial, cfg.WrapTransport = dialer.Dial, dialer.Share(cfg.WrapTransport) // one connection for all of the cluster's clients
	ca, err := f.app.clusterApp(m.name, cfg)
	if err != nil {
		return err
	}
	defer close(ca.left) // after the informers below have stopped
	if err := probe(ctx, cfg); err != nil {
		return err
	}
	handles := make([]any, len(f.decls))
	for i, decl := range f.decls {
		if handles[i], err = decl(ca); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	factory := ca.Factory()
	wg.Go(func() { _ = factory.Start(cctx) })
	wg.Go(func() { _ = ca.recorder.Start(cctx) })
	sctx, scancel := context.WithTimeout(ctx, f.cfg.SyncTimeout)
	err = factory.WaitForSync(sctx)
	scancel()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("caches did not sync within %v: %w", f.cfg.SyncTimeout, err)
	}
	f.join(m, ca, handles)
	defer f.unjoin(m)
	<-ctx.Done()
	return nil
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
func (f *fleet) join(m *member, ca *App, handles []any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m.app, m.handles, m.subs = ca, handles, map[*fleetSub]controller.Subscription{}
	m.state, m.err, m.failures, m.since = clusterJoined, nil, 0, time.Now()
	f.markTriedLocked(m)
	for _, s := range f.subs {
		f.attachLocked(m, s)
	}
	f.metrics.joined.WithLabelValues(m.name).Set(1)
	f.app.log.Info("Fleet: cluster joined", "cluster", m.name)
}

// unjoin ends the member's subscriptions and waits until none enqueues.
func (f *fleet) unjoin(m *member) {
	f.mu.Lock()
	subs := m.subs
	m.app, m.handles, m.subs = nil, nil, nil
	if m.state == clusterJoined {
		m.state, m.since = clusterJoining, time.Now()
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

func (f *fleet) attachLocked(m *member, s *fleetSub) {
	sub, err := s.register(m.name, m.handles, s.name+"@"+m.name, s.q)
	if err != nil {
		f.app.log.Error("Fleet: a controller could not watch the cluster", "cluster", m.name, "source", s.name, "err", err)
		return
	}
	m.subs[s] = sub
}

// joined returns the member named name while it is joined, else nil.
func (f *fleet) joined(name string) *member {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.members[name]; m != nil && m.app != nil {
		return m
	}
	return nil
}

// joinedCluster is a joined member's name and handles (by declaration).
type joinedCluster struct {
	name    string
	handles []any
}

// joinedHandles lists the joined members' names and handles.
func (f *fleet) joinedHandles() []joinedCluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []joinedCluster
	for _, m := range f.members {
		if m.handles != nil {
			out = append(out, joinedCluster{m.name, m.handles})
		}
	}
	return out
}

// handle returns the handle made by decl i in the joined member name.
func (f *fleet) handle(name string, i int) (any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.members[name]
	if m == nil || m.handles == nil {
		return nil, false
	}
	return m.handles[i], true
}

// subscribe adds a fleet source's subscription: register subscribes it to
// one cluster, now for each joined one and later for each that joins.
func (f *fleet) subscribe(name string, q controller.Queue[ClusterKey], register registerFunc) controller.Subscription {
	s := &fleetSub{f: f, name: name, q: q, register: register, done: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, s)
	for _, m := range f.members {
		if m.subs != nil {
			f.attachLocked(m, s)
		}
	}
	return s
}

// registerFunc subscribes a fleet source to one joined cluster, whose
// handles (by declaration) are given: it is called with fleet.mu held, so
// it must not call Handle.In.
type registerFunc func(cluster string, handles []any, name string, q controller.Queue[ClusterKey]) (controller.Subscription, error)

// fleetSub is one controller source's subscription to the whole fleet.
type fleetSub struct {
	f        *fleet
	name     string
	q        controller.Queue[ClusterKey]
	register registerFunc
	once     sync.Once
	done     chan struct{}
}

// WaitForSync returns at once: a cluster's keys are enqueued from the
// moment its caches have synced, and the fleet's own readiness says when
// the clusters have been tried.
func (s *fleetSub) WaitForSync(context.Context) error { return nil }

func (s *fleetSub) Remove() {
	s.once.Do(func() {
		f := s.f
		f.mu.Lock()
		f.subs = slices.DeleteFunc(f.subs, func(x *fleetSub) bool { return x == s })
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

func (s *fleetSub) Done() <-chan struct{} { return s.done }

// clusterQueue is a cluster's view of a fleet controller's queue: it adds
// the cluster to each object key.
type clusterQueue struct {
	cluster string
	q       controller.Queue[ClusterKey]
}

func (c clusterQueue) Add(k cache.Key) { c.q.Add(ClusterKey{c.cluster, k}) }
func (c clusterQueue) AddWithPriority(k cache.Key, p int) {
	c.q.AddWithPriority(ClusterKey{c.cluster, k}, p)
}
func (c clusterQueue) AddAfter(k cache.Key, d time.Duration) {
	c.q.AddAfter(ClusterKey{c.cluster, k}, d)
}

// fillQueue is a cluster's view of a fleet controller's queue for keys
// that are ClusterKeys already (MapTo): one without a cluster is the
// cluster's own.
type fillQueue struct {
	cluster string
	q       controller.Queue[ClusterKey]
}

func (c fillQueue) fill(k ClusterKey) ClusterKey {
	if k.Cluster == "" {
		k.Cluster = c.cluster
	}
	return k
}
func (c fillQueue) Add(k ClusterKey)                       { c.q.Add(c.fill(k)) }
func (c fillQueue) AddWithPriority(k ClusterKey, p int)    { c.q.AddWithPriority(c.fill(k), p) }
func (c fillQueue) AddAfter(k ClusterKey, d time.Duration) { c.q.AddAfter(c.fill(k), d) }

// clusterApp makes the App of one cluster: the fleet App's options, with a
// client, recorder and informer factory of its own, a logger that names
// the cluster, and a metrics registry of its own (dropped with it).
func (a *App) clusterApp(name string, cfg *rest.Config) (*App, error) {
	opts := a.opts
	opts.Fleet, opts.LeaderElection = nil, nil
	if a.member == nil {
		opts.Sharding = nil
	}
	opts.WaitForKinds = false // a cluster that lacks a kind fails its attempt and is retried
	opts.Registry = prometheus.NewRegistry()
	opts.Logger = a.log.With("cluster", name)
	ca := &App{cfg: cfg, opts: opts, log: opts.Logger, watchNS: a.watchNS, cluster: name, left: make(chan struct{})}
	if a.member != nil {
		// The fleet App's member shards the cluster's informers as the
		// cluster's (see fleetShard).
		ca.member, ca.shardFlags = a.member, map[string]*atomic.Bool{}
	}
	// A write to a cluster that stopped answering gives up after
	// clusterWriteTimeout, so a reconcile of it does not hold a worker that
	// the other clusters' keys need (informers' watches are not bounded).
	ccfg := rest.CopyConfig(cfg)
	ccfg.Timeout = clusterWriteTimeout
	var err error
	if ca.client, err = client.New(ccfg, client.Options{Scheme: opts.Scheme, FieldManager: opts.Name, Logger: opts.Logger}); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	ca.recorder, err = record.New(cfg, record.Options{Component: opts.Name, Host: host, Scheme: opts.Scheme, Logger: opts.Logger, Registerer: opts.Registry, Clock: opts.Clock})
	if err != nil {
		return nil, err
	}
	return ca, nil
}

// gatherClusters gathers the joined clusters' registries (their informers'
// and recorders' metrics), each series labelled with its cluster, for
// /metrics.
func (a *App) gatherClusters() ([]*dto.MetricFamily, error) {
	if a.fleet == nil {
		return nil, nil
	}
	f := a.fleet
	regs := map[string]prometheus.Gatherer{}
	f.mu.Lock()
	for _, m := range f.members {
		if m.app != nil {
			regs[m.name] = m.app.opts.Registry
		}
	}
	f.mu.Unlock()
	return kmetrics.Labelled("cluster", regs)
}

// Clusters is the fleet's state for the debug page, by name.
func (f *fleet) Clusters() []fleetspec.ClusterStatus { return f.status() }

func (f *fleet) status() []fleetspec.ClusterStatus {
	f.mu.Lock()
	out := make([]fleetspec.ClusterStatus, 0, len(f.members))
	var factories []*informer.Factory
	for _, m := range f.members {
		st := fleetspec.ClusterStatus{Name: m.name, Origin: m.spec.Origin, State: m.state, Since: m.since, Err: m.err}
		var fac *informer.Factory
		if m.app != nil {
			fac = m.app.factory
		}
		out = append(out, st)
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
				out[i].Err = fmt.Errorf("%s: %w", is.Name, fleetspec.Explain(is.Source.LastError))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// readyCheck is /readyz's "fleet" check (see Fleet.RequireAll).
func (f *fleet) readyCheck(*http.Request) error {
	select {
	case <-f.tried:
	default:
		return fmt.Errorf("clusters not yet tried: %s", strings.Join(f.pending(), ", "))
	}
	if !f.cfg.RequireAll {
		return nil
	}
	var not []string
	for _, st := range f.status() {
		if st.State != clusterJoined {
			not = append(not, st.Name+" ("+st.State+")")
		}
	}
	if len(not) > 0 {
		return fmt.Errorf("clusters not joined: %s", strings.Join(not, ", "))
	}
	return nil
}

// report is the fleet's table in /readyz?verbose.
func (f *fleet) report() string {
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
