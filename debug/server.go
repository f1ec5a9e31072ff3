package debug

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	runtimedebug "runtime/debug"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/memlimit"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/sharding"
)

// Paths the server serves ("/" redirects to the page). Under a Wrap that
// authorizes by path, such as package metrics/secure's, a reader needs get
// on the non-resource URLs "/debug" and "/debug/*".
const (
	PagePath     = "/debug/"
	SnapshotPath = "/debug/api/v1/snapshot"
	// KeysPath answers "why did this key run?": for ?controller=NAME, the
	// latest reconciles of each key it reconciled recently (the last 5 of
	// each of the 256 most recent keys; controller.Status.KeyHistory),
	// with their causes; &key=KEY narrows it to one key.
	KeysPath = "/debug/api/v1/keys"
	// PprofPath is net/http/pprof's index of the process's profiles
	// (goroutine, heap, allocs, mutex, block, CPU profile, trace), behind
	// the same guard as the page: `go tool pprof URL/heap` with the
	// reader's credentials.
	PprofPath = "/debug/pprof/"
)

// Defaults of Options.
const (
	DefaultWindow = time.Minute
	DefaultSeries = 5 * time.Minute
)

// sampleEvery is the least time between two samples of the history: more
// viewers do not mean more samples.
const sampleEvery = time.Second

//go:embed page.html
var page []byte

// ErrInsecureAddr is returned by New for an address that is not loopback
// when no Wrap secures the server.
var ErrInsecureAddr = errors.New("debug: the page would be served unauthenticated beyond this host")

// Options configures a Server. Addr (or Listener) is required: the page is
// off unless asked for.
type Options struct {
	// Addr is where the page is served, for example "127.0.0.1:8082", or
	// "127.0.0.1:0" for a free port (see Addr). Without Wrap it must be a
	// loopback address.
	Addr string
	// Listener, if set, is used instead of listening on Addr. Start closes
	// it.
	Listener net.Listener

	// Wrap, if set, wraps the server's handler: the same authentication and
	// authorization that guard /metrics (--metrics-secure). Then any
	// address is allowed.
	Wrap func(http.Handler) http.Handler
	// TLS, if set, makes the server serve HTTPS with it.
	TLS *tls.Config

	// Window is how far back rates, windowed duration quantiles and the
	// trouble rules look. Default 1 minute.
	Window time.Duration
	// Series is the span of the plotted series. Default 5 minutes.
	Series time.Duration

	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
}

// Server serves the debug page and its JSON for one manager. It is a
// manager.Runnable that runs on every replica: add it to the manager it
// shows. It keeps nothing while nobody asks: each request reads the
// manager's parts (their Status methods) and adds at most one sample per
// second to a history of Options.Series for the rates and plots.
type Server struct {
	m    *manager.Manager
	opts Options
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	history []sample

	addr      net.Addr
	addrReady chan struct{}
	started   bool
}

// New returns a server for m. It checks opts and does no I/O.
func New(m *manager.Manager, opts Options) (*Server, error) {
	if m == nil {
		return nil, errors.New("debug: nil manager")
	}
	if opts.Addr == "" && opts.Listener == nil {
		return nil, errors.New("debug: no address to serve on")
	}
	if opts.Wrap == nil {
		if err := checkLoopback(opts); err != nil {
			return nil, err
		}
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Series <= 0 {
		opts.Series = DefaultSeries
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{m: m, opts: opts, log: opts.Logger, now: time.Now, addrReady: make(chan struct{})}, nil
}

func checkLoopback(opts Options) error {
	if opts.Listener != nil {
		if a, ok := opts.Listener.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			return fmt.Errorf("%w: listener on %s is not loopback; set Options.Wrap to secure it", ErrInsecureAddr, a)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return fmt.Errorf("debug: address %q: %w", opts.Addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %q is not a loopback address (use 127.0.0.1:PORT, or secure the page like /metrics)", ErrInsecureAddr, opts.Addr)
	}
	return nil
}

// NeedLeaderElection is false: every replica serves its own page.
func (s *Server) NeedLeaderElection() bool { return false }

// bound is the address the server listens on once Start has bound it, else
// nil.
func (s *Server) bound() net.Addr {
	select {
	case <-s.addrReady:
		return s.addr
	default:
		return nil
	}
}

// AddrReady is closed once Start has bound its address or failed to.
func (s *Server) AddrReady() <-chan struct{} { return s.addrReady }

// URL is the address of path on the server (PagePath for the page,
// SnapshotPath for its JSON, PprofPath...), "" before Start has bound it
// (and after a Start that failed to listen).
func (s *Server) URL(path string) string {
	a := s.bound()
	if a == nil {
		return ""
	}
	scheme := "http"
	if s.opts.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + a.String() + path
}

// Start serves until ctx is done, then shuts the server down.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("debug: server already started")
	}
	s.started = true
	s.mu.Unlock()

	lis := s.opts.Listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", s.opts.Addr); err != nil {
			close(s.addrReady)
			return fmt.Errorf("debug: listen on %s: %w", s.opts.Addr, err)
		}
	}
	s.addr = lis.Addr()
	close(s.addrReady)
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second, TLSConfig: s.opts.TLS}
	done := make(chan error, 1)
	go func() {
		if s.opts.TLS != nil {
			done <- srv.ServeTLS(lis, "", "")
		} else {
			done <- srv.Serve(lis)
		}
	}()
	s.log.Info("Serving the debug page", "url", s.URL(PagePath))
	var err error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		err = <-done
	case err = <-done:
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("debug: serving on %s: %w", s.addr, err)
}

// handler serves the page at PagePath, the snapshot at SnapshotPath and
// the profiles at PprofPath, wrapped by Options.Wrap. Only Start serves it,
// so that New's check of the address (loopback unless guarded) holds.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", http.RedirectHandler(PagePath, http.StatusFound))
	mux.HandleFunc("GET "+PagePath+"{$}", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		// The page is whole: it may load nothing from anywhere.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET "+SnapshotPath, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		if r.URL.Query().Has("pretty") {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(s.snapshot()); err != nil {
			s.log.Debug("debug: writing a snapshot", "err", err)
		}
	})
	mux.HandleFunc("GET "+KeysPath, s.serveKeys)
	mux.HandleFunc("GET "+PprofPath, pprof.Index) // and each named profile below it
	mux.HandleFunc("GET "+PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc("GET "+PprofPath+"profile", pprof.Profile)
	mux.HandleFunc("GET "+PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc("POST "+PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc("GET "+PprofPath+"trace", pprof.Trace)
	if s.opts.Wrap != nil {
		return s.opts.Wrap(mux)
	}
	return mux
}

// snapshot reads the manager's parts now and returns the document the
// snapshot endpoint serves. It adds the moment to the history when the
// newest sample is a second old or more.
func (s *Server) snapshot() snapshot {
	in := gather(s.m)
	in.Time = s.now()
	s.mu.Lock()
	hist := s.history
	if n := len(hist); n == 0 || in.Time.Sub(hist[n-1].Time) >= sampleEvery {
		s.history = append(s.history, sampleOf(in))
		keep := max(s.opts.Window, s.opts.Series)
		i := 0
		for i < len(s.history) && in.Time.Sub(s.history[i].Time) > keep {
			i++
		}
		s.history = s.history[i:]
	}
	s.mu.Unlock()
	return build(in, hist, s.opts.Window, s.opts.Series)
}

// gather reads the state of m and of what it runs: the status of every
// informer factory, controller and shard-group member among its runnables
// (the types with a Status method returning []informer.Status,
// controller.Status or sharding.Status) and of its elector. Time is left
// zero.
func gather(m *manager.Manager) input {
	in := input{Manager: m.Status()}
	in.Leader = in.Manager.Election
	for _, r := range in.Manager.Runnables {
		switch x := r.(type) {
		case interface{ Status() []informer.Status }:
			in.Informers = append(in.Informers, x.Status()...)
		case interface{ Status() controller.Status }:
			in.Controllers = append(in.Controllers, x.Status())
		case interface{ Status() sharding.Status }:
			in.Shards = append(in.Shards, x.Status())
		case interface{ Clusters() []ClusterStatus }:
			in.Clusters = append(in.Clusters, x.Clusters()...)
		}
	}
	in.MemoryLimit = runtimedebug.SetMemoryLimit(-1)
	in.MemoryLimitSet, in.MemoryLimitApplied = memlimit.Applied()
	return in
}

// keysDoc is the document of KeysPath.
type keysDoc struct {
	Version    int                         `json:"version"`
	Controller string                      `json:"controller"`
	Keys       map[string][]reconcileError `json:"keys"`
}

// serveKeys answers KeysPath: the latest reconciles of a controller's
// keys, or of one key.
func (s *Server) serveKeys(w http.ResponseWriter, r *http.Request) {
	name, key := r.URL.Query().Get("controller"), r.URL.Query().Get("key")
	var names []string
	for _, run := range s.m.Status().Runnables {
		c, ok := run.(interface{ Status() controller.Status })
		if !ok {
			continue
		}
		st := c.Status()
		if st.Name != name {
			names = append(names, st.Name)
			continue
		}
		doc := keysDoc{Version: SchemaVersion, Controller: name, Keys: map[string][]reconcileError{}}
		if st.KeyHistory != nil {
			for k, rs := range st.KeyHistory() {
				if key != "" && k != key {
					continue
				}
				out := make([]reconcileError, 0, len(rs))
				for _, x := range rs {
					out = append(out, reconcileOf(x))
				}
				doc.Keys[k] = out
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err := json.NewEncoder(w).Encode(doc); err != nil {
			s.log.Debug("debug: writing the keys of a controller", "err", err)
		}
		return
	}
	http.Error(w, fmt.Sprintf("no controller %q: give ?controller= one of %q", name, names), http.StatusNotFound)
}
