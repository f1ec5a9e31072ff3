package fleet

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Dialer dials a cluster's connections and keeps them, so that Close can
// end them all when the cluster leaves: idle HTTP/2 connections would
// otherwise keep their goroutines and buffers for minutes. A rest.Config
// with a Dial of its own also gets a transport of its own, not one shared
// with another cluster of the same TLS settings.
type Dialer struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
	shared http.RoundTripper // the cluster's transport (Share)
}

// Share returns a rest.Config's WrapTransport that gives every client made
// from the config the first transport made for it, so that the cluster's
// informers, client, recorder and discovery share one connection pool (one
// HTTP/2 connection, its goroutine and buffers) as a program's clients of
// one cluster do in client-go: with Dial set, client-go makes a transport,
// and so a connection, for each. wrap, if not nil, is the config's own
// WrapTransport, applied on top. Every config given it must have the
// cluster's TLS settings.
func (d *Dialer) Share(wrap func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		d.mu.Lock()
		if d.shared == nil {
			d.shared = rt
		}
		rt = d.shared
		d.mu.Unlock()
		if wrap != nil {
			return wrap(rt)
		}
		return rt
	}
}

// Dial is a rest.Config's Dial.
func (d *Dialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	nd := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if d.conns == nil {
		d.conns = map[*trackedConn]struct{}{}
	}
	d.conns[tc] = struct{}{}
	return tc, nil
}

// Close closes every connection and refuses new ones.
func (d *Dialer) Close() {
	d.mu.Lock()
	d.closed = true
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// Open is the number of connections open.
func (d *Dialer) Open() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

type trackedConn struct {
	net.Conn
	d    *Dialer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}

// Backoff is the wait before the next attempt to join a cluster after
// failures attempts (1, 2, ...) in a row: Initial doubled per failure, at
// most Max.
func Backoff(failures int, initial, max time.Duration) time.Duration {
	d := initial
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
