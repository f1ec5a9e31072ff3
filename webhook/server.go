package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Default file names in ServerOptions.CertDir: those of a kubernetes.io/tls
// Secret, which cert-manager writes.
const (
	DefaultCertName = "tls.crt"
	DefaultKeyName  = "tls.key"
)

// shutdownTimeout bounds how long Start waits for requests in flight once
// its context is done.
const shutdownTimeout = 10 * time.Second

// ServerOptions configures a Server.
type ServerOptions struct {
	// Addr is the host:port to listen on, such as ":9443"; a port of 0
	// picks a free one (see Server.Addr). Default ":9443", kubebuilder's.
	Addr string
	// CertDir holds the serving certificate and key, usually a mounted
	// kubernetes.io/tls Secret. Required.
	CertDir string
	// CertName and KeyName are the files' names in CertDir. Defaults
	// tls.crt and tls.key.
	CertName, KeyName string
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
}

// Server serves webhooks over TLS (1.2 or later) for the API server. Its
// certificate and key are read again when their files change, so a
// certificate that cert-manager renews is served without a restart. It is
// a manager.Runnable that runs on every replica, leader or not: the API
// server calls whichever replica its Service picks.
type Server struct {
	opts  ServerOptions
	log   *slog.Logger
	certs *certSource

	mu      sync.Mutex
	mux     *http.ServeMux
	paths   map[string]bool
	err     error // a path handled twice; Start returns it
	started bool

	addr    atomic.Pointer[string]
	serving chan struct{}
}

// NewServer checks opts and reads the certificate and key; it fails, naming
// the file, when one cannot be read or the two do not match. It starts
// nothing.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = ":9443"
	}
	if opts.CertDir == "" {
		return nil, errors.New("webhook: ServerOptions.CertDir is empty: give the directory holding the serving certificate and key (tls.crt and tls.key of a kubernetes.io/tls Secret)")
	}
	if opts.CertName == "" {
		opts.CertName = DefaultCertName
	}
	if opts.KeyName == "" {
		opts.KeyName = DefaultKeyName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	certs, err := newCertSource(filepath.Join(opts.CertDir, opts.CertName), filepath.Join(opts.CertDir, opts.KeyName), opts.Logger)
	if err != nil {
		return nil, err
	}
	return &Server{
		opts:    opts,
		log:     opts.Logger,
		certs:   certs,
		mux:     http.NewServeMux(),
		paths:   map[string]bool{},
		serving: make(chan struct{}),
	}, nil
}

// Handle serves h at path (an exact path, such as MutatePath(gvk)). A path
// handled twice makes Start fail, naming it.
func (s *Server) Handle(path string, h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.paths[path]; dup {
		s.err = errors.Join(s.err, fmt.Errorf("webhook: path %s is handled twice", path))
		return
	}
	s.paths[path] = true
	s.mux.Handle(path, h)
}

// Addr is the address the server listens on, with the port it got for
// port 0; "" until Start has bound it (see Serving).
func (s *Server) Addr() string {
	if p := s.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// Serving is closed once Start has bound the address and serves.
func (s *Server) Serving() <-chan struct{} { return s.serving }

// NeedLeaderElection is false: every replica serves webhooks.
func (s *Server) NeedLeaderElection() bool { return false }

// Start reads the certificate and key again, listens and serves until ctx is done, then waits (up to 10s) for
// requests in flight and returns once its goroutines have exited. It
// returns an error when it cannot listen or was started before.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("webhook: Server started twice")
	}
	s.started = true
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.certs.mu.Lock()
	err = s.certs.load() // the files may have changed since NewServer
	s.certs.mu.Unlock()
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("webhook: listen on %s: %w", s.opts.Addr, err)
	}
	addr := lis.Addr().String()
	s.addr.Store(&addr)
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.get, NextProtos: []string{"h2", "http/1.1"}}
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tls.NewListener(lis, tlsCfg)) }()
	close(s.serving)
	s.log.Info("Serving webhooks", "addr", addr)
	select {
	case err := <-done:
		return fmt.Errorf("webhook: serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Error("Webhook server shutdown", "err", err)
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook: serve on %s: %w", addr, err)
	}
	return nil
}
