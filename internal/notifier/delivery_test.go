package notifier

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/kloop-dev/kloop/internal/metricstest"
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

// A full queue loses nothing: what it cannot take is set aside per object,
// merged with the object's later changes, and queued as the worker makes
// room; the checkpoint commits each object's state only once the sink
// delivered it (merged changes with the change that carries them).
func TestDelivery_FullQueueSetsChangesAsideAndLosesNone(t *testing.T) {
	td := newTestDelivery(t, "http://127.0.0.1:1/", 1, 1)
	tr := newTracker(100, nil)
	offer := func(typ EventType, name, rv string, changes ...string) {
		ev := &Event{Type: typ, Kind: "ConfigMap", Resource: "configmap", Namespace: "ns", Name: name, Changes: changes, ResourceVersion: rv}
		var entry *ckEntry
		if typ != Delete {
			entry = &ckEntry{UID: name, RV: rv}
		}
		ev.tr, ev.pend = tr, tr.begin("cm@ns", "ns/"+name, entry)
		td.offer(ev)
		ev.finish(true) // the source's reference
	}
	offer(Create, "a", "1") // queued
	offer(Create, "b", "2") // set aside
	offer(Update, "b", "3", "data.x")
	offer(Update, "b", "4", "data.y")
	offer(Create, "c", "5")
	offer(Delete, "c", "6") // cancels c's create
	offer(Update, "a", "7", "data.z")
	if len(td.queue) != 1 || td.over.len() != 2 {
		t.Fatalf("queued %d, set aside %d objects; want 1 and 2 (b, a)", len(td.queue), td.over.len())
	}
	if v := metricstest.Value(t, td.reg, MetricOverflowed, "sink", "hook"); v != 6 {
		t.Errorf("overflowed = %v, want 6", v)
	}
	if v := metricstest.Value(t, td.reg, MetricMerged, "sink", "hook"); v != 4 {
		t.Errorf("merged = %v, want 4 (b's two updates, c's create and delete)", v)
	}
	if _, ok := committed(tr, "cm@ns", "ns/b"); ok {
		t.Error("b committed before the sink sent it")
	}
	// The worker takes them in order; each take refills the queue.
	var got []string
	for {
		ev, ok := td.next()
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s %s rv%s %v", ev.Type, ev.Name, ev.ResourceVersion, ev.Changes))
		ev.finish(true) // delivered
	}
	want := []string{"create a rv1 []", "create b rv4 []", "update a rv7 [data.z]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	for name, rv := range map[string]string{"a": "7", "b": "4"} {
		if e, _ := committed(tr, "cm@ns", "ns/"+name); e.RV != rv {
			t.Errorf("%s committed at rv %q, want %s", name, e.RV, rv)
		}
	}
	if _, ok := committed(tr, "cm@ns", "ns/c"); ok {
		t.Error("c, created and deleted while set aside, is in the checkpoint")
	}
	if v := metricstest.Value(t, td.reg, MetricOverflowObjects, "sink", "hook"); v != 0 {
		t.Errorf("overflow objects = %v after the drain, want 0", v)
	}
	if n := len(tr.chains); n != 0 {
		t.Errorf("%d chains left in the tracker, want 0", n)
	}
}

// What a stop leaves set aside is not committed: the next start sends it.
func TestDelivery_SetAsideChangesLeftAtTheStopAreSentAfterTheRestart(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a receiver that hangs
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	td := newTestDelivery(t, srv.URL, 5, 1)
	tr := newTracker(100, nil)
	for _, name := range []string{"a", "b", "c"} {
		ev := createEvent()
		ev.Name = name
		ev.tr, ev.pend = tr, tr.begin("pod@default", "default/"+name, &ckEntry{UID: name, RV: "1"})
		td.offer(ev)
		ev.finish(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	td.run(ctx, 50*time.Millisecond)
	if v := td.failed(t, failShutdown); v != 3 {
		t.Errorf("failed{reason=shutdown} = %v, want 3", v)
	}
	for _, name := range []string{"a", "b", "c"} {
		if e, ok := committed(tr, "pod@default", "default/"+name); ok {
			t.Errorf("%s committed (%+v) though never delivered", name, e)
		}
	}
}

func TestCoalesce_OneNotificationPerObjectTellsWhatTheChangesDid(t *testing.T) {
	ev := func(typ EventType, rv string, changes ...string) *Event {
		return &Event{Type: typ, ResourceVersion: rv, Changes: changes, OldObject: map[string]any{"rv": rv}}
	}
	render := func(evs []*Event) string {
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "%s@%s%v old=%v;", e.Type, e.ResourceVersion, e.Changes, e.OldObject["rv"])
		}
		return b.String()
	}
	for _, tc := range []struct {
		name    string
		in      []*Event
		want    string
		carried int
	}{
		{"create+update", []*Event{ev(Create, "1"), ev(Update, "2", "data.a")}, "create@2[] old=<nil>;", 1},
		{"update+update", []*Event{ev(Update, "1", "data.b"), ev(Update, "2", "data.a", "data.b")}, "update@2[data.a data.b] old=1;", 1},
		{"update+update capped", []*Event{ev(Update, "1", "a", "..."), ev(Update, "2", "b")}, "update@2[a b ...] old=1;", 1},
		{"create+delete", []*Event{ev(Create, "1"), ev(Delete, "2")}, "", 2},
		{"update+delete", []*Event{ev(Update, "1", "x"), ev(Delete, "2")}, "delete@2[] old=2;", 1},
		{"delete+delete", []*Event{ev(Delete, "1"), ev(Delete, "2")}, "delete@1[] old=1;", 1},
		{"delete+create+update", []*Event{ev(Delete, "1"), ev(Create, "2"), ev(Update, "3", "x")}, "delete@1[] old=1;create@3[] old=<nil>;", 1},
		{"delete+create+delete", []*Event{ev(Delete, "1"), ev(Create, "2"), ev(Delete, "3")}, "delete@1[] old=1;", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var evs []*Event
			carried := 0
			for _, e := range tc.in {
				var c []*Event
				evs, c = coalesce(evs, e)
				carried += len(c)
			}
			if got := render(evs); got != tc.want || carried != tc.carried {
				t.Errorf("got %q carrying %d, want %q carrying %d", got, carried, tc.want, tc.carried)
			}
			if len(evs) > 2 {
				t.Errorf("%d events waiting for one object, want at most 2", len(evs))
			}
		})
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
