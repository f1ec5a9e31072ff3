package informer

import (
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	fleetspec "github.com/kloop-dev/kloop/internal/fleet"
)

// floodServer is an HTTP/2 server on loopback whose /flood handler writes
// until the client's receive window is full and it stays blocked (a write
// deadline ends it), then reports how much it wrote: what the client's
// transport took in without the body being read.
type floodServer struct {
	*httptest.Server
	conns   atomic.Int64
	written chan int
}

func newFloodServer(t *testing.T) *floodServer {
	s := &floodServer{written: make(chan int, 4)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/flood" {
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(3 * time.Second)); err != nil {
			t.Error(err)
		}
		chunk := make([]byte, 16<<10)
		n := 0
		for n < 64<<20 {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			if err := rc.Flush(); err != nil {
				break
			}
			n += len(chunk)
		}
		s.written <- n
	}))
	s.EnableHTTP2 = true
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *floodServer) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// client is an HTTP client made from cfg as client-go makes one, closed
// with the test.
func client(t *testing.T, cfg *rest.Config) *http.Client {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(c.Transport) })
	return c
}

// buffered is how much of /flood c's transport takes in while nothing
// reads the body.
func (s *floodServer) buffered(t *testing.T, c *http.Client) int {
	resp, err := c.Get(s.URL + "/flood")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the request went over %s, want HTTP/2", resp.Proto)
	}
	n := <-s.written
	_, _ = io.Copy(io.Discard, resp.Body)
	return n
}

func ping(t *testing.T, c *http.Client, url string) {
	resp, err := c.Get(url + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// A factory's informers watch with a small HTTP/2 receive window over one
// connection of their own; a client made from the same config keeps
// client-go's shared transport and its 4 MiB window.
func TestFactory_WatchesWithASmallWindowOverAConnectionOfItsOwn(t *testing.T) {
	s := newFloodServer(t)
	cfg := s.config()
	f := NewFactory(cfg, FactoryOptions{Registerer: prometheus.NewRegistry()})

	// Two of the factory's clients (a typed and a metadata informer's,
	// say) share a connection.
	watch1, watch2 := client(t, preferProtobuf[*corev1.ConfigMap](f.cfg)), client(t, f.cfg)
	ping(t, watch1, s.URL)
	ping(t, watch2, s.URL)
	if n := s.conns.Load(); n != 1 {
		t.Errorf("the factory's two clients opened %d connections, want 1", n)
	}
	if got := s.buffered(t, watch2); got > 2*watchWindow {
		t.Errorf("a factory's stream took in %d bytes unread, want at most %d (its window is %d)", got, 2*watchWindow, watchWindow)
	}
	other := client(t, cfg)
	if got := s.buffered(t, other); got < 2<<20 {
		t.Errorf("a client of the factory's config took in %d bytes unread, want client-go's window (4 MiB)", got)
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections in all, want 2: the factory's and client-go's", n)
	}
}

// A config with a Dial of its own keeps it: a fleet's clients of one
// cluster, its informers included, share the cluster's one connection.
func TestFactory_KeepsAConfigsOwnDialAndItsConnection(t *testing.T) {
	s := newFloodServer(t)
	d := &fleetspec.Dialer{}
	t.Cleanup(d.Close)
	cfg := s.config()
	cfg.Dial, cfg.WrapTransport = d.Dial, d.Share(nil)
	f := NewFactory(cfg, FactoryOptions{Registerer: prometheus.NewRegistry()})
	for _, c := range []*http.Client{client(t, f.cfg), client(t, cfg), client(t, preferProtobuf[*corev1.ConfigMap](f.cfg))} {
		ping(t, c, s.URL)
	}
	if n := d.Open(); n != 1 {
		t.Errorf("the cluster has %d connections open, want 1", n)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("the server saw %d connections, want 1", n)
	}
}

// setWindow leaves alone what it cannot reach and HTTP/2 settings already
// chosen.
func TestSetWindow_KeepsHTTP2SettingsAlreadyChosen(t *testing.T) {
	chosen := &http.HTTP2Config{MaxReceiveBufferPerStream: 1 << 20}
	tr := &http.Transport{HTTP2: chosen}
	setWindow(tr, watchWindow)
	if tr.HTTP2 != chosen || chosen.MaxReceiveBufferPerStream != 1<<20 {
		t.Errorf("setWindow changed the transport's own HTTP/2 settings: %+v", tr.HTTP2)
	}
	plain := &http.Transport{}
	setWindow(roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("unused") }), watchWindow)
	setWindow(plain, watchWindow)
	if plain.HTTP2 == nil || plain.HTTP2.MaxReceiveBufferPerStream != watchWindow {
		t.Errorf("setWindow on a bare transport: HTTP2 = %+v, want a window of %d", plain.HTTP2, watchWindow)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
