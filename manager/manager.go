package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/metrics"
)

// DefaultShutdownTimeout is the default of Options.ShutdownTimeout.
const DefaultShutdownTimeout = 30 * time.Second

var (
	// ErrAlreadyStarted is returned by a second call to Start.
	ErrAlreadyStarted = errors.New("manager: already started")
	// ErrLeadershipLost is returned by Start when this replica lost the
	// lease while it was running: its controllers have stopped and cannot
	// be restarted, so the process should exit and start over.
	ErrLeadershipLost = errors.New("manager: leadership lost")
	// ErrShutdownTimeout is returned by Start when runnables were still
	// running ShutdownTimeout after the stop began. Those runnables' goroutines
	// may still be running when Start returns.
	ErrShutdownTimeout = errors.New("manager: shutdown timeout: runnables still running")
)

// Runnable is anything the manager runs: controllers, informer factories,
// servers of your own. Start runs until ctx is done and returns only once
// everything it started has stopped. An error returned before ctx is done
// stops the whole manager. With leader election a Runnable runs only on the
// leader, unless it fills caches or has a method NeedLeaderElection() bool
// that returns false.
type Runnable interface {
	Start(ctx context.Context) error
}

// RunnableFunc adapts a function to a Runnable.
type RunnableFunc func(ctx context.Context) error

// Start calls f(ctx).
func (f RunnableFunc) Start(ctx context.Context) error { return f(ctx) }

// leaderChooser is implemented by runnables that say whether they need
// leadership: a Runnable with a method NeedLeaderElection() bool that
// returns false runs on every replica. A Runnable without the method needs
// leadership (runs only on the leader) unless it fills caches.
type leaderChooser interface {
	NeedLeaderElection() bool
}

// filler is a Runnable that fills caches (an *informer.Factory is one). The
// manager runs caches on every replica, leader or not, so a standby has
// warm caches when it takes over; /readyz reports ready only once every
// cache has synced; and caches stop only after every other runnable has.
type filler interface {
	Runnable
	WaitForSync(ctx context.Context) error
}

// Elector runs a leader election for the manager: a
// *leaderelection.Elector, over a coordination.k8s.io Lease, is one.
type Elector interface {
	// Run campaigns until ctx is done. Each time this replica becomes the
	// leader it calls lead with a context that is cancelled when leadership
	// is lost or ctx ends, and it keeps (renews) the lease until lead
	// returns; then it releases the lease. Run returns once ctx is done
	// and lead has returned, or with an error when it cannot campaign.
	// Run may also return nil after a lost leadership; the manager treats
	// that as ErrLeadershipLost.
	Run(ctx context.Context, lead func(ctx context.Context) error) error
}

// Options configures a Manager. The zero value works: no HTTP server, no
// leader election, a 30-second shutdown bound, metrics from the kloop
// registry, logs to slog.Default(). Nothing listens on a port unless an
// address or a listener is given.
type Options struct {
	// MetricsAddr is where /metrics is served, for example ":8080", or
	// "127.0.0.1:0" for a free port (see MetricsAddr). "" or "0": off.
	MetricsAddr string
	// HealthAddr is where /healthz and /readyz are served. "" or "0": off.
	// When it equals MetricsAddr one server serves all three paths.
	HealthAddr string
	// MetricsListener and HealthListener, if set, are used instead of
	// listening on the addresses (Start closes them). They may be the same
	// listener: then one server serves all three paths.
	MetricsListener, HealthListener net.Listener
	// WrapMetrics, if set, wraps the /metrics handler, for example with
	// authentication and authorization.
	WrapMetrics func(http.Handler) http.Handler
	// MetricsTLS, if set, serves /metrics over TLS with this config (see
	// package metrics/secure, which makes one with WrapMetrics). The
	// health probes are served over TLS too when they share its address.
	MetricsTLS *tls.Config

	// LeaderElection, if set, makes leader-needing runnables (controllers
	// by default) run only while this replica leads. Nil: they always run.
	LeaderElection Elector

	// ShutdownTimeout bounds the stop, from ctx done until every runnable
	// has returned. Controllers bound their own drain by their DrainTimeout;
	// set it below this. Default 30 s; negative waits forever.
	ShutdownTimeout time.Duration

	// Gatherer is what /metrics serves. Default: the kloop metrics
	// registry, which workqueues, informers and controllers register on.
	Gatherer prometheus.Gatherer

	// Logger receives the manager's logs. Default slog.Default().
	Logger *slog.Logger
}

// Manager runs informer factories, controllers and other runnables under
// one context, with optional leader election and an HTTP server for
// metrics and health probes. See the package documentation.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu            sync.Mutex
	caches        []filler
	always        []Runnable // need no leadership
	leader        []Runnable // need leadership
	healthz       []namedCheck
	readyz        []namedCheck
	readyzReports []func() string
	started       bool
	addrs         map[string]net.Addr // by endpoint: "metrics", "health"
	addrReady     chan struct{}

	synced   atomic.Bool   // every cache synced
	syncedCh chan struct{} // closed when synced is set
	electing atomic.Bool   // the elector is running (leading or standing by)
	leading  atomic.Bool
	stopping atomic.Bool
}

// New returns a manager. It starts nothing and does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Gatherer == nil {
		opts.Gatherer = metrics.Registry
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts, log: opts.Logger, addrs: map[string]net.Addr{}, addrReady: make(chan struct{}), syncedCh: make(chan struct{})}, nil
}

// Add registers a runnable. Caches run on every replica and gate
// readiness; runnables that need leadership (see leaderChooser)
// run only on the leader; the rest run everywhere. Add must be called
// before Start.
func (m *Manager) Add(r Runnable) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errors.New("manager: Add after Start")
	}
	switch {
	case isCache(r):
		m.caches = append(m.caches, r.(filler))
	case needsLeader(r):
		m.leader = append(m.leader, r)
	default:
		m.always = append(m.always, r)
	}
	return nil
}

func isCache(r Runnable) bool {
	_, ok := r.(filler)
	return ok
}

func needsLeader(r Runnable) bool {
	if le, ok := r.(leaderChooser); ok {
		return le.NeedLeaderElection()
	}
	return true
}

func (m *Manager) boundAddr(endpoint string) net.Addr {
	select {
	case <-m.addrReady:
		return m.addrs[endpoint]
	default:
		return nil
	}
}

// AddrReady is closed once Status's MetricsAddr and HealthAddr are known
// (or Start failed to listen; an address that is off stays nil).
func (m *Manager) AddrReady() <-chan struct{} { return m.addrReady }

// Start runs everything until ctx is done or a runnable fails:
//
//  1. binds the HTTP server;
//  2. starts caches and runnables that need no leadership;
//  3. with leader election, campaigns and, while leading, runs the
//     leader-needing runnables (the lease is released only after they have
//     all returned); without, runs them at once.
//
// On stop (ctx done, a runnable's error, or lost leadership) it cancels the
// leader-needing and the other runnables, waits for them, then stops the
// caches, then the HTTP server, all within ShutdownTimeout. It returns nil
// after a clean stop through ctx, otherwise the errors that caused or
// marred the stop (ErrLeadershipLost, ErrShutdownTimeout, runnable errors).
func (m *Manager) Start(ctx context.Context) (err error) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrAlreadyStarted
	}
	m.started = true
	caches, always, leader := m.caches, m.always, m.leader
	m.mu.Unlock()

	servers, err := m.listen()
	if err != nil {
		close(m.addrReady)
		return err
	}
	httpDone := make(chan error, len(servers))
	for _, s := range servers {
		for _, e := range s.endpoints {
			m.addrs[e] = s.lis.Addr()
		}
		m.log.Info("Serving "+strings.Join(s.paths, ", "), "addr", s.lis.Addr().String())
		go func() { httpDone <- s.srv.Serve(s.lis) }()
	}
	close(m.addrReady)

	// fail collects the first fatal error and starts the stop.
	stop := make(chan struct{})
	var (
		failMu   sync.Mutex
		failures []error
		stopOnce sync.Once
	)
	fail := func(err error) {
		failMu.Lock()
		failures = append(failures, err)
		failMu.Unlock()
		stopOnce.Do(func() { close(stop) })
	}

	cacheCtx, cancelCaches := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCaches()
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()

	var cacheWG, runWG sync.WaitGroup
	run := func(wg *sync.WaitGroup, rctx context.Context, r Runnable) {
		wg.Go(func() {
			if err := r.Start(rctx); err != nil && rctx.Err() == nil {
				fail(fmt.Errorf("runnable %s: %w", describe(r), err))
			} else if err != nil && !errors.Is(err, context.Canceled) {
				m.log.Error("Runnable failed while stopping", "runnable", describe(r), "err", err)
			}
		})
	}
	for _, c := range caches {
		run(&cacheWG, cacheCtx, c)
	}
	if m.opts.LeaderElection != nil {
		// Electing from now, not from when elect's goroutine is scheduled:
		// a /readyz once the caches synced must not see a standby as not
		// electing.
		m.electing.Store(true)
	}
	runWG.Go(func() { m.waitForCaches(runCtx, caches) })
	for _, r := range always {
		run(&runWG, runCtx, r)
	}
	if m.opts.LeaderElection == nil {
		m.leading.Store(true)
		for _, r := range leader {
			run(&runWG, runCtx, r)
		}
	} else {
		runWG.Go(func() { m.elect(runCtx, leader, run, fail) })
	}

	select {
	case <-ctx.Done():
		m.log.Info("Stopping: context done", "cause", context.Cause(ctx))
	case <-stop:
		failMu.Lock() // a later failure may be appended meanwhile
		first := errors.Join(failures...)
		failMu.Unlock()
		m.log.Error("Stopping: a runnable failed", "err", first)
	}
	m.stopping.Store(true)

	var deadline <-chan time.Time
	if m.opts.ShutdownTimeout > 0 {
		t := time.NewTimer(m.opts.ShutdownTimeout)
		defer t.Stop()
		deadline = t.C
	}
	timedOut := false
	wait := func(wg *sync.WaitGroup, what string) {
		if timedOut {
			return
		}
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-deadline:
			timedOut = true
			m.log.Error("Shutdown timeout: giving up waiting", "waitingFor", what, "shutdownTimeout", m.opts.ShutdownTimeout)
		}
	}
	cancelRun()
	wait(&runWG, "controllers and runnables")
	cancelCaches()
	wait(&cacheWG, "caches")
	for _, s := range servers {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.srv.Shutdown(sctx)
		cancel()
	}
	failMu.Lock() // runnables that outlived the shutdown timeout may still fail
	defer failMu.Unlock()
	for range servers {
		if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			failures = append(failures, fmt.Errorf("manager: HTTP server: %w", err))
		}
	}
	if timedOut {
		failures = append(failures, ErrShutdownTimeout)
	}
	m.log.Info("Stopped")
	return errors.Join(failures...)
}

// elect campaigns until ctx is done; lead runs the leader-needing
// runnables and returns only once they all have. The caller has set
// electing.
func (m *Manager) elect(ctx context.Context, leader []Runnable, run func(*sync.WaitGroup, context.Context, Runnable), fail func(error)) {
	defer m.electing.Store(false)
	err := m.opts.LeaderElection.Run(ctx, func(lctx context.Context) error {
		m.log.Info("Became the leader; starting controllers", "controllers", len(leader))
		m.leading.Store(true)
		var wg sync.WaitGroup
		for _, r := range leader {
			run(&wg, lctx, r)
		}
		<-lctx.Done()
		wg.Wait()
		m.leading.Store(false)
		m.log.Info("Controllers stopped; leadership can be released")
		if ctx.Err() == nil {
			fail(ErrLeadershipLost)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		fail(fmt.Errorf("manager: leader election: %w", err))
	}
}

// waitForCaches marks the manager synced once every cache has synced.
func (m *Manager) waitForCaches(ctx context.Context, caches []filler) {
	for _, c := range caches {
		if err := c.WaitForSync(ctx); err != nil {
			if ctx.Err() == nil {
				m.log.Error("Cache did not sync", "cache", describe(c), "err", err)
			}
			return
		}
	}
	m.synced.Store(true)
	close(m.syncedCh)
	m.log.Info("Caches synced", "caches", len(caches))
}

// Synced is closed once every cache added to the manager has synced, the
// moment /readyz's "caches" check starts to pass.
func (m *Manager) Synced() <-chan struct{} { return m.syncedCh }

// server is one HTTP server of the manager's.
type server struct {
	endpoints []string // "metrics", "health"
	paths     []string
	srv       *http.Server
	lis       net.Listener
}

// addrOff reports whether an address option means "not served".
func addrOff(addr string) bool { return addr == "" || addr == "0" }

// listen binds every configured server before anything starts, so that a
// port in use fails Start at once. Metrics and health share one server
// when they share an address or a listener.
func (m *Manager) listen() ([]server, error) {
	type want struct {
		endpoint string
		addr     string
		lis      net.Listener
	}
	wants := []want{
		{"metrics", m.opts.MetricsAddr, m.opts.MetricsListener},
		{"health", m.opts.HealthAddr, m.opts.HealthListener},
	}
	var out []server
	fail := func(err error) ([]server, error) {
		for _, s := range out {
			s.lis.Close()
		}
		for _, w := range wants {
			if w.lis != nil {
				w.lis.Close()
			}
		}
		return nil, err
	}
next:
	for _, w := range wants {
		if w.lis == nil && addrOff(w.addr) {
			continue
		}
		for i := range out {
			s := &out[i]
			if (w.lis != nil && w.lis == s.lis) || (w.lis == nil && w.addr == s.srv.Addr) {
				s.endpoints = append(s.endpoints, w.endpoint)
				continue next
			}
		}
		lis := w.lis
		if lis == nil {
			var err error
			if lis, err = net.Listen("tcp", w.addr); err != nil {
				return fail(fmt.Errorf("manager: listen on %s for %s: %w", w.addr, w.endpoint, err))
			}
		}
		out = append(out, server{endpoints: []string{w.endpoint}, lis: lis, srv: &http.Server{Addr: w.addr, ReadHeaderTimeout: 10 * time.Second}})
	}
	for i := range out {
		s := &out[i]
		mux := http.NewServeMux()
		for _, e := range s.endpoints {
			switch e {
			case "metrics":
				mux.Handle("/metrics", m.metricsHandler())
				s.paths = append(s.paths, "/metrics")
			case "health":
				mux.Handle("/healthz", m.healthzHandler())
				mux.Handle("/readyz", m.readyzHandler())
				s.paths = append(s.paths, "/healthz", "/readyz")
			}
		}
		s.srv.Handler = mux
		if m.opts.MetricsTLS != nil && slices.Contains(s.endpoints, "metrics") {
			s.lis = tls.NewListener(s.lis, m.opts.MetricsTLS)
		}
	}
	return out, nil
}

func describe(r Runnable) string {
	if n, ok := r.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", r)
}
