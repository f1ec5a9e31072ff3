package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/kloop-dev/kloop/internal/metricstest"
)

// TestQueue_SendsAgainWhatTheReceiverSaysToSendLater: 429, 502, 503 and
// 504 are answers to try again (after Retry-After); 400 is not, and its
// spans are counted as not exported.
func TestQueue_SendsAgainWhatTheReceiverSaysToSendLater(t *testing.T) {
	for _, c := range []struct {
		name     string
		answers  []int // the receiver's answers in turn; 200 after them
		posts    int
		exported float64
		failed   float64
	}{
		{"503 then 429 then taken", []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}, 3, 1, 0},
		{"502 and 504 then taken", []int{http.StatusBadGateway, http.StatusGatewayTimeout}, 3, 1, 0},
		{"400 is not sent again", []int{http.StatusBadRequest}, 1, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies [][]byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				n := len(bodies)
				bodies = append(bodies, b)
				mu.Unlock()
				if n < len(c.answers) {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(c.answers[n])
				}
			}))
			defer srv.Close()
			e, reg := testExporter(t, srv.URL, nil)
			_, sp := e.Tracer("t").Start(context.Background(), "reconcile")
			sp.End()
			if err := e.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != c.posts {
				t.Fatalf("%d posts, want %d", len(bodies), c.posts)
			}
			for i, b := range bodies[1:] {
				if string(b) != string(bodies[0]) {
					t.Errorf("post %d differs from the first: the same request must be sent again", i+2)
				}
			}
			if n := metricstest.Value(t, reg, "kloop_trace_spans_exported_total"); n != c.exported {
				t.Errorf("exported %v spans, want %v", n, c.exported)
			}
			if n := metricstest.Value(t, reg, "kloop_trace_spans_dropped_total", "reason", "export_failed"); n != c.failed {
				t.Errorf("export_failed %v spans, want %v", n, c.failed)
			}
		})
	}
}
