package notifier

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/metrics/metricstest"
)

// logBuffer collects slog text lines, without times, safely for several
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// statusServer answers the i-th request with statuses[i] (the last one
// from then on) and counts requests.
type statusServer struct {
	*httptest.Server
	statuses []int
	n        atomic.Int32
}

func newStatusServer(t *testing.T, statuses ...int) *statusServer {
	s := &statusServer{statuses: statuses}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(s.n.Add(1)) - 1
		code := s.statuses[min(i, len(s.statuses)-1)]
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "3")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

// testDelivery is a webhook delivery to url whose waits are recorded, not
// slept.
type testDelivery struct {
	*delivery
	reg    *prometheus.Registry
	logs   *logBuffer
	mu     sync.Mutex
	delays []time.Duration
}

func newTestDelivery(t *testing.T, url string, maxAttempts, queueSize int) *testDelivery {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHTTPSender(SinkConfig{Name: "hook", Type: SinkWebhook, URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	f, _ := newFilter(FilterConfig{})
	td := &testDelivery{reg: reg, logs: &logBuffer{}}
	td.delivery = &delivery{
		name: "hook", sender: h, filter: f, maxAttempts: maxAttempts,
		retryBase: 500 * time.Millisecond, retryMax: 30 * time.Second,
		log: td.logs.Logger(), m: m, queue: make(chan *Event, queueSize),
		wait: func(ctx context.Context, d time.Duration) error {
			td.mu.Lock()
			td.delays = append(td.delays, d)
			td.mu.Unlock()
			return ctx.Err()
		},
	}
	return td
}

func (td *testDelivery) failed(t *testing.T, reason string) float64 {
	v, _ := metricstest.Find(t, td.reg, MetricFailed, "sink", "hook", "reason", reason)
	return v
}

func (td *testDelivery) sent(t *testing.T) float64 {
	v, _ := metricstest.Find(t, td.reg, MetricSent, "sink", "hook")
	return v
}

func TestDelivery_RetriesServerErrorsAnd429WithBackoffThenDelivers(t *testing.T) {
	srv := newStatusServer(t, 503, 429, 500, 200)
	td := newTestDelivery(t, srv.URL, 5, 1)
	td.deliver(context.Background(), createEvent())

	if n := srv.n.Load(); n != 4 {
		t.Errorf("%d requests, want 4 (three failures, then success)", n)
	}
	// 500ms, then the 429's Retry-After of 3s (over the 1s backoff), then 2s.
	if want := []time.Duration{500 * time.Millisecond, 3 * time.Second, 2 * time.Second}; !reflect.DeepEqual(td.delays, want) {
		t.Errorf("waits %v, want %v", td.delays, want)
	}
	if v := metricstest.Value(t, td.reg, MetricSent, "sink", "hook", "resourceType", "Pod", "eventType", "create"); v != 1 {
		t.Errorf("sent = %v, want 1", v)
	}
	for _, r := range []string{failAttempts, failRejected} {
		if v := td.failed(t, r); v != 0 {
			t.Errorf("failed{reason=%s} = %v, want 0", r, v)
		}
	}
	if n := strings.Count(td.logs.String(), "will retry"); n != 3 {
		t.Errorf("%d retry logs, want 3:\n%s", n, td.logs)
	}
}

func TestDelivery_GivesUpAfterMaxAttemptsLoggingAndCounting(t *testing.T) {
	srv := newStatusServer(t, 500)
	td := newTestDelivery(t, srv.URL, 4, 1)
	td.deliver(context.Background(), createEvent())
	if n := srv.n.Load(); n != 4 {
		t.Errorf("%d requests, want 4 (MaxAttempts)", n)
	}
	if want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}; !reflect.DeepEqual(td.delays, want) {
		t.Errorf("waits %v, want %v", td.delays, want)
	}
	if v := td.failed(t, failAttempts); v != 1 {
		t.Errorf("failed{reason=attempts} = %v, want 1", v)
	}
	if td.sent(t) != 0 {
		t.Error("counted as sent")
	}
	logs := td.logs.String()
	if !strings.Contains(logs, `level=ERROR msg="Giving up on a notification" sink=hook kind=Pod namespace=default name=nginx-6d4cf56db6-abcde event=create attempts=4`) {
		t.Errorf("no give-up log naming the sink, object and attempts:\n%s", logs)
	}
}

func TestDelivery_DoesNotRetryClientErrors(t *testing.T) {
	for _, code := range []int{400, 401, 404, 413} {
		srv := newStatusServer(t, code, 200)
		td := newTestDelivery(t, srv.URL, 5, 1)
		td.deliver(context.Background(), createEvent())
		if n := srv.n.Load(); n != 1 {
			t.Errorf("status %d: %d requests, want 1", code, n)
		}
		if v := td.failed(t, failRejected); v != 1 {
			t.Errorf("status %d: failed{reason=rejected} = %v, want 1", code, v)
		}
		if len(td.delays) != 0 {
			t.Errorf("status %d: waited %v", code, td.delays)
		}
	}
}

func TestDelivery_RetriesNetworkErrors(t *testing.T) {
	srv := newStatusServer(t, 200)
	url := srv.URL
	srv.Close() // connection refused from now on
	td := newTestDelivery(t, url, 3, 1)
	td.deliver(context.Background(), createEvent())
	if len(td.delays) != 2 {
		t.Errorf("waits %v, want 2 (3 attempts)", td.delays)
	}
	if v := td.failed(t, failAttempts); v != 1 {
		t.Errorf("failed{reason=attempts} = %v, want 1", v)
	}
}

func TestDelivery_DelayIsCappedAtRetryMax(t *testing.T) {
	d := &delivery{retryBase: time.Second, retryMax: 5 * time.Second}
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, d.delay(a, nil))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if got := d.delay(1, &sendError{retryAfter: time.Hour}); got != 5*time.Second {
		t.Errorf("Retry-After of an hour gave %v, want the 5s cap", got)
	}
}

func TestDelivery_FullQueueDropsAndCounts(t *testing.T) {
	td := newTestDelivery(t, "http://127.0.0.1:1/", 1, 2)
	for range 3 {
		td.offer(createEvent())
	}
	if len(td.queue) != 2 {
		t.Errorf("queue holds %d, want 2", len(td.queue))
	}
	if v := td.failed(t, failQueue); v != 1 {
		t.Errorf("failed{reason=queue_full} = %v, want 1", v)
	}
	if !strings.Contains(td.logs.String(), "Sink queue full") {
		t.Errorf("no log of the drop:\n%s", td.logs)
	}
}

func TestDelivery_FilterKeepsEventsOutOfTheQueue(t *testing.T) {
	td := newTestDelivery(t, "http://127.0.0.1:1/", 1, 2)
	td.filter, _ = newFilter(FilterConfig{Events: []EventType{Delete}})
	td.offer(createEvent())
	if len(td.queue) != 0 {
		t.Error("a filtered-out event was queued")
	}
}

func TestDelivery_StopDrainsWhatIsQueuedInOrderThenRefuses(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		mu.Lock()
		seen = append(seen, b.String())
		mu.Unlock()
	}))
	defer srv.Close()
	td := newTestDelivery(t, srv.URL, 1, 10)
	names := []string{"a", "b", "c"}
	for _, n := range names {
		ev := createEvent()
		ev.Name = n
		td.offer(ev)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before it ran: everything queued is drained
	td.run(ctx, time.Minute)
	if len(seen) != 3 {
		t.Fatalf("%d delivered after the stop, want 3", len(seen))
	}
	for i, n := range names {
		if !strings.Contains(seen[i], `"name":"`+n+`"`) {
			t.Errorf("delivery %d = %s, want %s (queue order)", i, seen[i], n)
		}
	}
	td.offer(createEvent())
	if len(td.queue) != 0 || td.failed(t, failShutdown) != 1 {
		t.Errorf("an event offered after the stop: queued %d, failed{reason=shutdown} = %v; want 0 and 1", len(td.queue), td.failed(t, failShutdown))
	}
}

func TestDelivery_DrainIsBoundedByTheTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a receiver that hangs
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	td := newTestDelivery(t, srv.URL, 5, 10)
	for range 3 {
		td.offer(createEvent())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		td.run(ctx, 100*time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run still draining 30s after a stop with a 100ms drain timeout")
	}
	if v := td.failed(t, failShutdown); v != 3 {
		t.Errorf("failed{reason=shutdown} = %v, want 3 (all undelivered)", v)
	}
}

// A Slack incoming webhook's URL path is its credential: it must not reach
// the logs, whatever the failure.
func TestDelivery_LogsNeverHoldTheWebhookURLsPath(t *testing.T) {
	const secretPath = "/services/T0000/B0000/XXXXSECRETXXXX"
	srv := newStatusServer(t, 500, 404)
	closed := newStatusServer(t, 200)
	closedURL := closed.URL
	closed.Close() // connection refused

	for _, url := range []string{srv.URL + secretPath, closedURL + secretPath} {
		td := newTestDelivery(t, url, 2, 1)
		td.deliver(context.Background(), createEvent())
		td.deliver(context.Background(), createEvent())
		logs := td.logs.String()
		if !strings.Contains(logs, "err=") {
			t.Fatalf("no failure logged:\n%s", logs)
		}
		if strings.Contains(logs, "SECRET") {
			t.Errorf("the webhook URL's path was logged:\n%s", logs)
		}
	}
}
