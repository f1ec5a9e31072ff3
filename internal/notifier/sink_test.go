package notifier

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got, indented, with testdata/name.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file:\n got: %s\nwant: %s", name, buf.Bytes(), want)
	}
}

var testTime = time.Date(2026, 1, 1, 12, 0, 0, 123456789, time.UTC)

func createEvent() *Event {
	return &Event{
		Type: Create, Kind: "Pod", APIVersion: "v1", Resource: "pod", Namespace: "default", Name: "nginx-6d4cf56db6-abcde",
		Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "nginx-6d4cf56db6-abcde", "namespace": "default"}},
		Time:   testTime,
	}
}

func updateEvent() *Event {
	return &Event{
		Type: Update, Kind: "ConfigMap", APIVersion: "v1", Resource: "configmap", Namespace: "web", Name: "settings",
		Object:  map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": "web"}, "data": map[string]any{"k": "v2"}},
		Changes: []string{"data.k"},
		Time:    testTime,
	}
}

func TestWebhookPayload_Golden(t *testing.T) {
	for _, tc := range []struct {
		file string
		ev   *Event
		sink SinkConfig
	}{
		{"webhook_create.json", createEvent(), SinkConfig{}},
		{"webhook_create_object.json", createEvent(), SinkConfig{IncludeObject: true}},
		{"webhook_update_object.json", updateEvent(), SinkConfig{IncludeObject: true, IncludeChanges: true}},
	} {
		b, err := webhookBody(tc.ev, tc.ev.Message(), tc.sink)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b)
	}
}

func TestWebhookPayload_HasKubewatchsFieldsUnchanged(t *testing.T) {
	b, err := webhookBody(createEvent(), createEvent().Message(), SinkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// kubewatch's webhook payload for the same event, as its handler
	// emits it.
	want := `{"eventmeta":{"kind":"Pod","name":"nginx-6d4cf56db6-abcde","namespace":"default","reason":"Created"},"text":"A ` + "`Pod`" + ` in namespace ` + "`default`" + ` has been ` + "`Created`" + `:\n` + "`nginx-6d4cf56db6-abcde`" + `","time":"2026-01-01T12:00:00.123456789Z"}`
	if string(b) != want {
		t.Errorf("payload\n got %s\nwant %s", b, want)
	}
}

func TestSlackPayload_Golden(t *testing.T) {
	b, err := slackWebhookBody(updateEvent(), updateEvent().Message(), SinkConfig{Channel: "#k8s", Username: "kubewatch", Emoji: ":eyes:"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "slack_update.json", b)
	b, err = slackWebhookBody(createEvent(), createEvent().Message(), SinkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "slack_create_minimal.json", b)
}

func TestLogSink_WritesOneLinePerEvent(t *testing.T) {
	var buf bytes.Buffer
	for _, format := range []string{"text", "json"} {
		l := &logSender{mu: &sync.Mutex{}, out: &buf, format: format}
		for _, ev := range []*Event{createEvent(), updateEvent()} {
			if err := l.send(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := "2026-01-01T12:00:00Z Created Pod default/nginx-6d4cf56db6-abcde\n" +
		"2026-01-01T12:00:00Z Updated ConfigMap web/settings changes=data.k\n"
	lines := strings.SplitAfter(buf.String(), "\n")
	if got := lines[0] + lines[1]; got != want {
		t.Errorf("text lines:\n%s\nwant:\n%s", got, want)
	}
	for _, l := range lines[2:4] {
		var p webhookPayload
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Errorf("json line %q: %v", l, err)
		}
		if p.Object != nil {
			t.Errorf("json line %q carries the object", l)
		}
	}
}

func TestHTTPSender_PostsJSONAndClassifiesStatuses(t *testing.T) {
	var (
		mu     sync.Mutex
		status = http.StatusOK
		got    []byte
		ctype  string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got, _ = io.ReadAll(r.Body)
		ctype = r.Header.Get("Content-Type")
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "body of "+http.StatusText(status))
	}))
	defer srv.Close()
	h, err := newHTTPSender(SinkConfig{Name: "w", Type: SinkWebhook, URL: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	ctx := context.Background()
	if err := h.send(ctx, createEvent()); err != nil {
		t.Fatalf("200: %v", err)
	}
	want, _ := webhookBody(createEvent(), createEvent().Message(), SinkConfig{})
	if !bytes.Equal(got, want) || ctype != "application/json" {
		t.Errorf("received %s (%s), want %s (application/json)", got, ctype, want)
	}
	for _, tc := range []struct {
		status    int
		retryable bool
	}{{500, true}, {503, true}, {429, true}, {400, false}, {404, false}, {410, false}} {
		mu.Lock()
		status = tc.status
		mu.Unlock()
		err := h.send(ctx, createEvent())
		if err == nil || isRetryable(err) != tc.retryable {
			t.Errorf("status %d: err %v, retryable %v, want an error, retryable %v", tc.status, err, isRetryable(err), tc.retryable)
			continue
		}
		if !strings.Contains(err.Error(), "body of "+http.StatusText(tc.status)) {
			t.Errorf("status %d: error %q lacks the response body", tc.status, err)
		}
		if se := err.(*sendError); tc.status == 429 && se.retryAfter != 7*time.Second {
			t.Errorf("429: retryAfter = %v, want 7s from the header", se.retryAfter)
		}
	}
	srv.Close()
	if err := h.send(ctx, createEvent()); err == nil || !isRetryable(err) {
		t.Errorf("closed server: err %v, want a retryable network error", err)
	}
}

func TestHTTPSender_TLSTrustsTheGivenCertOrSkipsVerification(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	certFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		sc     SinkConfig
		wantOK bool
	}{
		{"system roots only", SinkConfig{}, false},
		{"cert", SinkConfig{Cert: certFile}, true},
		{"tlsskip", SinkConfig{TLSSkip: true}, true},
	} {
		tc.sc.Name, tc.sc.Type, tc.sc.URL = "w", SinkWebhook, srv.URL
		h, err := newHTTPSender(tc.sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = h.send(context.Background(), createEvent())
		h.close()
		if (err == nil) != tc.wantOK {
			t.Errorf("%s: send = %v, want ok %v", tc.name, err, tc.wantOK)
		}
		if err != nil && isRetryable(err) {
			t.Errorf("%s: a certificate error is retryable: %v", tc.name, err)
		}
	}
	if _, err := newHTTPSender(SinkConfig{Name: "w", Type: SinkWebhook, URL: srv.URL, Cert: filepath.Join(t.TempDir(), "missing.pem")}, nil); err == nil {
		t.Error("a missing cert file was accepted")
	}
}
