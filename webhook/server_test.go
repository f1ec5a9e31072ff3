package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/kloop-dev/kloop/internal/webhookmode"
	"github.com/kloop-dev/kloop/webhook"
)

func writeCerts(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	ca, err := webhookmode.WriteCerts(dir, "127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("bad CA PEM")
	}
	return pool
}

func TestNewServer_NamesTheCertificateFileItCannotUse(t *testing.T) {
	good := t.TempDir()
	writeCerts(t, good)
	other := t.TempDir()
	writeCerts(t, other)
	mismatched := t.TempDir()
	for _, f := range []struct{ from, name string }{{good, "tls.crt"}, {other, "tls.key"}} {
		b, err := os.ReadFile(filepath.Join(f.from, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mismatched, f.name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		opts webhook.ServerOptions
		want []string
	}{
		{"no directory", webhook.ServerOptions{}, []string{"CertDir is empty"}},
		{"no certificate", webhook.ServerOptions{CertDir: empty}, []string{filepath.Join(empty, "tls.crt")}},
		{"no key", webhook.ServerOptions{CertDir: good, KeyName: "missing.key"}, []string{filepath.Join(good, "missing.key")}},
		{"a key of another certificate", webhook.ServerOptions{CertDir: mismatched},
			[]string{filepath.Join(mismatched, "tls.crt"), filepath.Join(mismatched, "tls.key"), "do not make a key pair"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhook.NewServer(tc.opts)
			if err == nil {
				t.Fatal("NewServer succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// clock is a settable time for the server's rate limit on file checks.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startServer starts srv until the test ends.
func startServer(t *testing.T, srv *webhook.Server) {
	t.Helper()
	testwait.Run(t, "the webhook server", srv.Start)
	testwait.Closed(t, "the webhook server to serve", srv.Serving())
}

// servedSerial is the serial number of the certificate srv serves.
func servedSerial(t *testing.T, srv *webhook.Server, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.Dial("tcp", srv.Addr(), &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestServer_ServesANewCertificatePairAtTheNextHandshakeAndKeepsTheOldForABrokenOne(t *testing.T) {
	dir := t.TempDir()
	roots1 := writeCerts(t, dir)
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	webhook.SetClock(srv, clk.Now)
	startServer(t, srv)
	first := servedSerial(t, srv, roots1)

	// Within the rate limit the files are not looked at; past it they are.
	touchLater := func() {
		later := time.Now().Add(time.Minute)
		for _, f := range []string{"tls.crt", "tls.key"} {
			if err := os.Chtimes(filepath.Join(dir, f), later, later); err != nil {
				t.Fatal(err)
			}
		}
	}
	roots2 := writeCerts(t, dir)
	touchLater()
	if got := servedSerial(t, srv, roots1); got != first {
		t.Fatalf("within a second of the last look the server serves %s, want the old %s (the look is rate-limited)", got, first)
	}
	clk.Add(2 * time.Second)
	second := servedSerial(t, srv, roots2)
	if second == first {
		t.Fatalf("after a rotation the server still serves certificate %s", first)
	}

	// A key that does not match: the last good pair stays.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("-----BEGIN EC PRIVATE KEY-----\nbroken\n-----END EC PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	touchLater()
	clk.Add(2 * time.Second)
	if got := servedSerial(t, srv, roots2); got != second {
		t.Errorf("after a broken rotation the server serves %s, want the previous %s", got, second)
	}
}

func TestServer_RefusesOldTLSAndServesHandlersAtTheirPaths(t *testing.T) {
	dir := t.TempDir()
	roots := writeCerts(t, dir)
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }))
	if srv.NeedLeaderElection() {
		t.Error("NeedLeaderElection is true; a webhook server must run on every replica")
	}
	startServer(t, srv)
	if _, err := tls.Dial("tcp", srv.Addr(), &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 handshake succeeded")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + srv.Addr() + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("GET /hello = %q, want hello", body)
	}
}

func TestServer_StartFailsOnAPathHandledTwice(t *testing.T) {
	dir := t.TempDir()
	writeCerts(t, dir)
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/x", http.NotFoundHandler())
	srv.Handle("/x", http.NotFoundHandler())
	if err := srv.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "/x is handled twice") {
		t.Errorf("Start = %v, want an error naming /x", err)
	}
}
