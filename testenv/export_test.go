package testenv

import (
	"context"

	"github.com/kloop-dev/kloop/internal/cpbin"
)

// NewProxy is exported for the external tests.
var NewProxy = newProxy

// ProxyAddr is p's address, 127.0.0.1:port, for the tests that dial it
// themselves (users reach it through RESTConfig).
func ProxyAddr(p *Proxy) string { return p.ln.Addr().String() }

// The binaries' directories are internal/cpbin's; the tests check the
// order Start looks in under these names.
var (
	UserBinDir = cpbin.UserDir
	BinDir     = cpbin.Dir
)

// RestartAPIServer is StopAPIServer then StartAPIServer, for the tests.
func (e *Env) RestartAPIServer(ctx context.Context) error { return e.restartAPIServer(ctx) }

// Conns is the number of client connections the proxy holds open now.
func (p *Proxy) Conns() int { return p.openConns() }
