package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
)

// Fault is what a Proxy does to the traffic through it. The zero value
// passes everything through unchanged.
type Fault struct {
	// Blackhole accepts connections and reads what clients send, but
	// forwards nothing either way and sends nothing back, keeping every
	// connection open: what a dead load balancer or a half-open connection
	// looks like. A connection that has had bytes swallowed (or was
	// accepted while blackholed) is reset when a Fault without Blackhole is
	// set, because its stream lost bytes: as when a dead balancer is
	// replaced, clients reconnect.
	Blackhole bool
	// Latency delays every chunk of bytes by this much, in each direction
	// (so a round trip takes 2×Latency longer).
	Latency time.Duration
	// BytesPerSecond limits the throughput of each direction, across all
	// connections, to this many bytes a second. 0 means no limit.
	BytesPerSecond int
}

// Proxy is a TCP proxy on 127.0.0.1 in front of one backend address, whose
// Fault a test switches at any time: it applies at once to every open
// connection and to new ones. Reset cuts every connection. Only loopback
// addresses are accepted as backends.
//
// A Proxy starts two goroutines per connection and one accepting; Close
// stops them all and waits for them.
type Proxy struct {
	backend string
	ln      net.Listener

	mu     sync.Mutex
	fault  Fault
	up     *rate.Limiter // client to backend, nil without a limit
	down   *rate.Limiter // backend to client
	conns  map[*proxyConn]struct{}
	closed bool

	wg sync.WaitGroup
}

// newProxy listens on a free port of 127.0.0.1 and forwards to backend
// ("127.0.0.1:port"), passing everything until Set says otherwise.
func newProxy(backend string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(backend)
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy backend %q: %w", backend, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("testenv: proxy backend %q is not a loopback address", backend)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy listen: %w", err)
	}
	p := &Proxy{backend: backend, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// port is the proxy's port on 127.0.0.1.
func (p *Proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Set makes f the fault in force, for open connections and new ones;
// Set(Fault{}) lets everything through again. Leaving a blackhole resets
// the connections it swallowed bytes of.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	was := p.fault
	p.fault = f
	p.up, p.down = limiter(f.BytesPerSecond), limiter(f.BytesPerSecond)
	var cut []*proxyConn
	if was.Blackhole && !f.Blackhole {
		for c := range p.conns {
			if c.swallowed {
				cut = append(cut, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.reset()
	}
}

func limiter(bps int) *rate.Limiter {
	if bps <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(bps), max(bps/10, chunkSize))
}

// Reset cuts every open connection with a TCP reset; new connections are
// accepted as usual.
func (p *Proxy) Reset() {
	p.mu.Lock()
	cut := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		cut = append(cut, c)
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.reset()
	}
}

// openConns is the number of client connections open now.
func (p *Proxy) openConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening, cuts every connection and waits for the proxy's
// goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

// RESTConfig returns a copy of cfg that talks to the API server through p
// (p's backend must be that API server). The API server's certificate is
// valid for 127.0.0.1, so TLS works unchanged.
func (p *Proxy) RESTConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port()))
	return c
}

// APIServerProxy starts a Proxy in front of e's API server and closes it
// when the test ends.
func (e *Env) APIServerProxy(t interface {
	Helper()
	Fatalf(string, ...any)
	Cleanup(func())
}) *Proxy {
	t.Helper()
	p, err := newProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(e.APIServerPort)))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

const chunkSize = 32 << 10

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &proxyConn{p: p, client: client.(*net.TCPConn), ctx: ctx, cancel: cancel}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			cancel()
			client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(c.run)
	}
}

// proxyConn is one client connection and its backend connection.
type proxyConn struct {
	p       *Proxy
	client  *net.TCPConn
	backend *net.TCPConn    // guarded by p.mu; nil until dialed
	ctx     context.Context // done once the connection is cut or closed
	cancel  context.CancelFunc
	once    sync.Once

	swallowed bool // guarded by p.mu: a blackhole dropped bytes or an EOF, the stream is broken
}

func (c *proxyConn) run() {
	defer func() {
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
		c.close(false)
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	b, err := d.DialContext(c.ctx, "tcp", c.p.backend)
	if err != nil {
		return // the backend is down: the client sees its connection closed
	}
	backend := b.(*net.TCPConn)
	c.p.mu.Lock()
	c.backend = backend
	c.p.mu.Unlock()
	if c.ctx.Err() != nil {
		_ = backend.Close() // cut while dialing: close may not have seen it
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.pump(backend, c.client, true) })
	wg.Go(func() { c.pump(c.client, backend, false) })
	wg.Wait()
}

func (c *proxyConn) fault() (Fault, *rate.Limiter, *rate.Limiter) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.fault, c.p.up, c.p.down
}

func (c *proxyConn) swallow() {
	c.p.mu.Lock()
	c.swallowed = true
	c.p.mu.Unlock()
}

type chunk struct {
	data []byte
	due  time.Time
}

// pump copies src to dst, each chunk under the fault in force when it was
// read (blackhole, latency) and when it is written (blackhole, bandwidth).
// A reader stamps chunks and a writer sends them when due, so that latency
// delays bytes without cutting throughput.
func (c *proxyConn) pump(dst, src *net.TCPConn, up bool) {
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			f, _, _ := c.fault()
			if n > 0 {
				if f.Blackhole {
					c.swallow()
				} else {
					select {
					case q <- chunk{data: buf[:n], due: time.Now().Add(f.Latency)}:
					case <-c.ctx.Done():
						return
					}
				}
			}
			if err != nil {
				if f.Blackhole && c.ctx.Err() == nil {
					// Not even the end of the stream gets through: the
					// peer waits until the blackhole ends and cuts it.
					c.swallow()
					<-c.ctx.Done()
				}
				return
			}
		}
	}()
	defer func() {
		for range q { // let the reader finish
		}
	}()
	for ch := range q {
		if d := time.Until(ch.due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
				return
			}
		}
		f, upL, downL := c.fault()
		if f.Blackhole {
			c.swallow()
			continue
		}
		l := downL
		if up {
			l = upL
		}
		if l != nil {
			for n := len(ch.data); n > 0; {
				k := min(n, l.Burst())
				if err := l.WaitN(c.ctx, k); err != nil {
					return
				}
				n -= k
			}
		}
		if _, err := dst.Write(ch.data); err != nil {
			c.close(false)
			return
		}
	}
	if c.ctx.Err() == nil {
		_ = dst.CloseWrite() // src ended: pass the EOF on
	}
}

// reset cuts both sides with a TCP reset.
func (c *proxyConn) reset() { c.close(true) }

func (c *proxyConn) close(rst bool) {
	c.once.Do(func() {
		c.cancel()
		c.p.mu.Lock()
		backend := c.backend
		c.p.mu.Unlock()
		for _, conn := range []*net.TCPConn{c.client, backend} {
			if conn == nil {
				continue
			}
			if rst {
				_ = conn.SetLinger(0)
			}
			_ = conn.Close()
		}
	})
}
