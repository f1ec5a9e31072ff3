package notifier

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
)

func TestNotifier_StopDeliversWhatTheSinkHasQueued(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-drain")

	// A receiver that holds its first request until released.
	var (
		mu       sync.Mutex
		received []string
	)
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isFirst := false
		once.Do(func() { isFirst = true; close(first) })
		if isFirst {
			<-release
		}
		mu.Lock()
		received = append(received, r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })

	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	// A log sink after the slow one: an event is offered to the sinks in
	// order, so its line for c means c is in the slow sink's queue.
	lines := &lineSignal{want: "/c\n", seen: make(chan struct{})}
	n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: reg}), Config{
		Namespace: ns,
		Resources: []string{"configmap"},
		Sinks: []SinkConfig{
			{Name: "slow", Type: SinkWebhook, URL: srv.URL},
			{Name: "signal", Type: SinkLog},
		},
	}, Options{Out: lines, DrainTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)

	for _, name := range []string{"a", "b", "c"} {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-first:
	case <-time.After(60 * time.Second):
		t.Fatal("no request within 60s")
	}
	select {
	case <-lines.seen:
	case <-time.After(60 * time.Second):
		t.Fatal("c not offered to the sinks within 60s")
	}
	if q := len(n.deliveries[0].queue); q != 2 {
		t.Fatalf("%d queued behind the request in flight, want 2 (b and c)", q)
	}

	stop()
	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != 3 {
		t.Errorf("received %d notifications, want 3: the one in flight and the two queued at the stop", len(received))
	}
}

// lineSignal is the Out of log sinks: it closes seen at the first write
// ending in want.
type lineSignal struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (l *lineSignal) Write(p []byte) (int, error) {
	if strings.HasSuffix(string(p), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}
