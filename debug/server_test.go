package debug

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/watcher"
	"github.com/kloop-dev/kloop/workqueue"
)

// parts are runnables with the Status methods Gather looks for.
type fakeFactory struct{ st []informer.Status }

func (f *fakeFactory) Start(ctx context.Context) error       { <-ctx.Done(); return nil }
func (f *fakeFactory) WaitForSync(ctx context.Context) error { return nil }
func (f *fakeFactory) Status() []informer.Status             { return f.st }
func (f *fakeFactory) NeedLeaderElection() bool              { return false }

type fakeController struct{ st controller.Status }

func (c *fakeController) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (c *fakeController) Status() controller.Status       { return c.st }

type fakeMember struct{ st sharding.Status }

func (m *fakeMember) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (m *fakeMember) Status() sharding.Status         { return m.st }
func (m *fakeMember) NeedLeaderElection() bool        { return false }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newManager(t *testing.T, rs ...manager.Runnable) *manager.Manager {
	t.Helper()
	m, err := manager.New(manager.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestNew_RefusesAnUnsecuredAddressBeyondLoopback(t *testing.T) {
	m := newManager(t)
	for _, addr := range []string{":8082", "0.0.0.0:0", "10.1.2.3:80", "[::]:0", "example.com:80"} {
		if _, err := New(m, Options{Addr: addr}); !errors.Is(err, ErrInsecureAddr) {
			t.Errorf("New(%q) = %v, want ErrInsecureAddr", addr, err)
		}
		if _, err := New(m, Options{Addr: addr, Wrap: func(h http.Handler) http.Handler { return h }}); err != nil {
			t.Errorf("New(%q) with Wrap = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0", "127.0.0.2:8082"} {
		if _, err := New(m, Options{Addr: addr}); err != nil {
			t.Errorf("New(%q) = %v, want nil", addr, err)
		}
	}
	if _, err := New(m, Options{}); err == nil {
		t.Error("New without an address succeeded")
	}
	if _, err := New(nil, Options{Addr: "127.0.0.1:0"}); err == nil {
		t.Error("New without a manager succeeded")
	}
}

func start(t *testing.T, s *Server) (url string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start = %v after cancel, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Start did not return within 10s of cancel")
		}
	})
	select {
	case <-s.AddrReady():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not bind within 10s")
	}
	if s.URL(PagePath) == "" {
		t.Fatalf("Start failed to listen: %v", <-done)
	}
	return s.URL(PagePath)
}

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestServer_ServesThePageAndTheSnapshotOfTheManagersParts(t *testing.T) {
	f := &fakeFactory{st: []informer.Status{{Name: "cms", Synced: true, Objects: 2, Source: watcher.Status{Phase: watcher.PhaseWatching}}}}
	c := &fakeController{st: controller.Status{Name: "ctl", Workers: 1, Succeeded: 5, Queue: workqueue.Status{Name: "ctl"}}}
	sm := &fakeMember{st: sharding.Status{Group: "g", Slots: 4, Joined: true, Scope: []int{0, 1, 2, 3}}}
	s, err := New(newManager(t, f, c, sm), Options{Addr: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	clock := t0
	s.now = func() time.Time { return clock }
	url := start(t, s)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/debug/") || s.URL(SnapshotPath) != url+"api/v1/snapshot" {
		t.Fatalf("URL(PagePath) = %q, URL(SnapshotPath) = %q", url, s.URL(SnapshotPath))
	}
	root := strings.TrimSuffix(url, "debug/")
	if resp, body := get(t, root); resp.StatusCode != 200 || resp.Request.URL.Path != PagePath || !strings.Contains(body, "<title>kloop</title>") {
		t.Fatalf("GET / ended at %s with %d, want the page after a redirect", resp.Request.URL, resp.StatusCode)
	}

	resp, body := get(t, url)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(body, "api/v1/snapshot") {
		t.Fatalf("GET /: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("page CSP %q lets the page load from elsewhere", csp)
	}
	// Self-contained: nothing is fetched from another origin.
	for _, ext := range []string{"http://", "https://", "//cdn", "<link", "src="} {
		if strings.Contains(body, ext) {
			t.Errorf("the page contains %q: it must not load anything", ext)
		}
	}
	if resp, _ := get(t, url+"nothing-here"); resp.StatusCode != 404 {
		t.Errorf("GET /nothing-here: %d, want 404", resp.StatusCode)
	}

	snap := func() snapshot {
		t.Helper()
		resp, body := get(t, url+"api/v1/snapshot")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET snapshot: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var s snapshot
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("snapshot is not JSON: %v\n%s", err, body)
		}
		return s
	}
	first := snap()
	if first.Version != 1 || len(first.Informers) != 1 || first.Informers[0].Objects != 2 || len(first.Controllers) != 1 ||
		first.Controllers[0].Reconciles.Total != 5 || first.Controllers[0].Rates != nil || !first.Time.Equal(t0) ||
		len(first.Shards) != 1 || first.Shards[0].Scope != "0-3" {
		t.Fatalf("first snapshot: %+v", first)
	}
	// Ten seconds and 20 reconciles later, the rate is 2/s.
	clock = t0.Add(10 * time.Second)
	c.st.Succeeded = 25
	second := snap()
	if r := second.Controllers[0].Rates; r == nil || r.Reconciles != 2 || second.WindowSeconds != 10 {
		t.Fatalf("second snapshot: rates %+v over %vs; want 2/s over 10s", r, second.WindowSeconds)
	}
	if n := len(second.Controllers[0].Series.Time); n != 2 {
		t.Errorf("series has %d points, want 2", n)
	}
	// A request within a second of the last sample adds none.
	clock = clock.Add(500 * time.Millisecond)
	snap()
	s.mu.Lock()
	n := len(s.history)
	s.mu.Unlock()
	if n != 2 {
		t.Errorf("history holds %d samples, want 2", n)
	}
	// Samples older than the series span are let go.
	clock = clock.Add(DefaultSeries + time.Minute)
	snap()
	s.mu.Lock()
	n = len(s.history)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("history holds %d samples after 6 quiet minutes, want 1", n)
	}
	if _, body := get(t, url+"api/v1/snapshot?pretty"); !strings.Contains(body, "\n  \"version\": 1,") {
		t.Errorf("?pretty is not indented:\n%s", body)
	}
}

func TestServer_WrapGuardsEveryPath(t *testing.T) {
	guard := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer let-me-in" {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(newManager(t), Options{Listener: lis, Wrap: guard, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	url := start(t, s)
	for _, path := range []string{"", "api/v1/snapshot", "pprof/", "pprof/goroutine?debug=1"} {
		if resp, _ := get(t, url+path); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s without credentials: %d, want 401", path, resp.StatusCode)
		}
		if resp, _ := get(t, url+path, "Authorization", "Bearer let-me-in"); resp.StatusCode != 200 {
			t.Errorf("GET /%s with credentials: %d, want 200", path, resp.StatusCode)
		}
	}
}

func TestServer_ServesTheProcesssProfiles(t *testing.T) {
	s, err := New(newManager(t), Options{Addr: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	url := start(t, s)
	base := strings.TrimSuffix(url, PagePath) + PprofPath
	if resp, body := get(t, base); resp.StatusCode != 200 || !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Errorf("GET %s: %d, want 200 and the index of profiles:\n%.300s", base, resp.StatusCode, body)
	}
	// A goroutine dump in text names this test's function.
	if resp, body := get(t, base+"goroutine?debug=2"); resp.StatusCode != 200 || !strings.Contains(body, "TestServer_ServesTheProcesssProfiles") {
		t.Errorf("GET goroutine?debug=2: %d, want 200 and a dump naming this test:\n%.300s", resp.StatusCode, body)
	}
	if resp, body := get(t, base+"heap"); resp.StatusCode != 200 || len(body) == 0 {
		t.Errorf("GET heap: %d with %d bytes, want a profile", resp.StatusCode, len(body))
	}
}

func TestServer_StartFailsOnABusyAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	s, err := New(newManager(t), Options{Addr: lis.Addr().String(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("Start on a busy address = %v, want a listen error", err)
	}
	if s.URL(PagePath) != "" {
		t.Fatalf("URL %q after a failed Start, want \"\"", s.URL(PagePath))
	}
	if s.NeedLeaderElection() {
		t.Fatal("the debug server needs leadership; it must run on every replica")
	}
}
