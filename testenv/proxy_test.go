package testenv_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/testenv"
)

// echoServer answers every connection by echoing what it reads; it stops
// when the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, backend string) *testenv.Proxy {
	t.Helper()
	p, err := testenv.NewProxy(backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *testenv.Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", testenv.ProxyAddr(p), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads as many bytes back, within limit.
func roundTrip(c net.Conn, msg []byte, limit time.Duration) ([]byte, error) {
	if err := c.SetDeadline(time.Now().Add(limit)); err != nil {
		return nil, err
	}
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	got := make([]byte, len(msg))
	_, err := io.ReadFull(c, got)
	return got, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProxy_PassesBytesBothWays(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p)
	msg := bytes.Repeat([]byte("kloop "), 50000) // 300 kB, several chunks
	got, err := roundTrip(c, msg, 10*time.Second)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("round trip through the proxy: %d bytes back, err %v", len(got), err)
	}
	if p.Conns() != 1 {
		t.Fatalf("Conns = %d, want 1", p.Conns())
	}
}

func TestProxy_BlackholeKeepsConnectionsOpenAndSilentThenResetsThem(t *testing.T) {
	p := newProxy(t, echoServer(t))
	old := dial(t, p)
	if _, err := roundTrip(old, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(testenv.Fault{Blackhole: true})

	// An open connection: writes are taken, nothing comes back, and it
	// is not closed either (a read times out instead of seeing EOF).
	if _, err := roundTrip(old, []byte("into the void"), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection during a blackhole: err %v, want a read timeout (silence)", err)
	}
	// A new connection is accepted and read, and never answered.
	fresh := dial(t, p)
	if _, err := roundTrip(fresh, []byte("hello?"), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection during a blackhole: err %v, want a read timeout", err)
	}

	// The path returns: connections that lost bytes are reset; new ones work.
	p.Set(testenv.Fault{})
	for name, c := range map[string]net.Conn{"old": old, "fresh": fresh} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Errorf("%s connection after the blackhole: read err %v, want it reset", name, err)
		}
	}
	if _, err := roundTrip(dial(t, p), []byte("after"), 5*time.Second); err != nil {
		t.Fatalf("new connection after the blackhole: %v", err)
	}
}

func TestProxy_LatencyDelaysEachDirection(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p)
	const latency = 150 * time.Millisecond
	p.Set(testenv.Fault{Latency: latency})
	began := time.Now()
	if _, err := roundTrip(c, []byte("ping"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(began); rtt < 2*latency {
		t.Fatalf("round trip took %v with %v latency each way; want at least %v", rtt, latency, 2*latency)
	}
	p.Set(testenv.Fault{})
	began = time.Now()
	if _, err := roundTrip(c, []byte("ping"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(began); rtt >= latency {
		t.Fatalf("round trip took %v after Set(Fault{}); want no added latency", rtt)
	}
}

func TestProxy_BandwidthLimitBoundsThroughput(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p)
	const bps = 200 << 10
	p.Set(testenv.Fault{BytesPerSecond: bps})
	msg := bytes.Repeat([]byte{'x'}, 400<<10)
	began := time.Now()
	if _, err := roundTrip(c, msg, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// 400 kB each way at 200 kB/s, less one burst (32 kB) per direction.
	if took, least := time.Since(began), time.Duration(float64(len(msg)-(32<<10))/bps*float64(time.Second)); took < least {
		t.Fatalf("400 kB echoed in %v at %d B/s; want at least %v", took, bps, least)
	}
}

func TestProxy_ResetCutsEveryConnection(t *testing.T) {
	p := newProxy(t, echoServer(t))
	a, b := dial(t, p), dial(t, p)
	for _, c := range []net.Conn{a, b} {
		if _, err := roundTrip(c, []byte("up"), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	p.Reset()
	for _, c := range []net.Conn{a, b} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read after Reset: %v, want connection reset", err)
		}
	}
	if _, err := roundTrip(dial(t, p), []byte("again"), 5*time.Second); err != nil {
		t.Fatalf("new connection after Reset: %v", err)
	}
}

func TestProxy_RefusesBackendsOffLoopback(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:443", "example.com:443", "192.168.1.1:80"} {
		if _, err := testenv.NewProxy(addr); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("NewProxy(%q) = %v, want a loopback refusal", addr, err)
		}
	}
}
