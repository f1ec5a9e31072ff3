package fleet

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

// TestDialer_ShareGivesAClustersClientsOneConnection makes two HTTP
// clients from a cluster's config, as its informers and its client do:
// with Share their requests go over one connection, without it over one
// each.
func TestDialer_ShareGivesAClustersClientsOneConnection(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	conns := func(share bool) int {
		t.Helper()
		var d Dialer
		defer d.Close()
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, Dial: d.Dial}
		wrapped := 0
		if share {
			cfg.WrapTransport = d.Share(func(rt http.RoundTripper) http.RoundTripper { wrapped++; return rt })
		}
		for range 2 {
			hc, err := rest.HTTPClientFor(rest.CopyConfig(cfg))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Get(srv.URL + "/version")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("the test server answered over HTTP/%d, want HTTP/2", resp.ProtoMajor)
			}
		}
		if share && wrapped != 2 {
			t.Errorf("the config's own WrapTransport ran %d times for two clients, want 2", wrapped)
		}
		return d.Open()
	}
	if n := conns(true); n != 1 {
		t.Errorf("two clients with Share opened %d connections, want 1", n)
	}
	if n := conns(false); n != 2 {
		t.Errorf("two clients without Share opened %d connections, want 2 (the test does not show what Share changes)", n)
	}
}
