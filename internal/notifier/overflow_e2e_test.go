package notifier

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/testenv"
)

// flaky is a webhook receiver that answers 503 while down, and records
// like recv otherwise.
func flaky(t *testing.T, recv *receiver) (url string, down *atomic.Bool) {
	down = &atomic.Bool{}
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		recv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, down
}

// overflowConfig: a sink "slow" with a queue of 1 behind a receiver that
// is down, and a sink "up" whose receipt of a change says the notifier
// has offered every earlier change to both sinks (one source, in order).
func overflowConfig(ns, slowURL, upURL string) Config {
	return Config{
		Namespace: ns,
		Resources: []string{"configmap"},
		Sinks: []SinkConfig{
			{Name: "slow", Type: SinkWebhook, URL: slowURL + "/slow", QueueSize: 1, MaxAttempts: 1 << 30, IncludeObject: true},
			{Name: "up", Type: SinkWebhook, URL: upURL + "/up"},
		},
	}
}

func createConfigMaps(t *testing.T, kc kubernetes.Interface, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func countOf(ps []webhookPayload, reason, name string) int {
	n := 0
	for _, p := range ps {
		if p.EventMeta.Reason == reason && p.EventMeta.Name == name {
			n++
		}
	}
	return n
}

// A sink whose queue (of 1) is full while its receiver is down loses no
// change: once the receiver is back every ConfigMap's create arrives, once,
// and the object changed while set aside arrives in its latest state.
func TestNotifier_AFullQueueLosesNoChangeOnceTheReceiverRecovers(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "notifier-overflow")
	recv := newReceiver(t)
	slowURL, down := flaky(t, recv)
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	cfg := overflowConfig(ns, slowURL, recv.URL)
	cfg.Checkpoint.Type = CheckpointNone
	n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: reg}), cfg,
		Options{RetryBase: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)
	defer func() {
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()

	const count = 20
	var names []string
	for i := range count {
		names = append(names, fmt.Sprintf("cm-%d", i))
	}
	createConfigMaps(t, kc, ns, names...)
	// cm-5 changes twice while set aside: one notification of its
	// latest state stands for the create and both updates.
	cms := kc.CoreV1().ConfigMaps(ns)
	for _, v := range []string{"2", "3"} {
		cm, err := cms.Get(t.Context(), "cm-5", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = v
		if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMaps(t, kc, ns, "marker")
	recv.waitFor(t, "/up", "the marker on the healthy sink", is("Created", "ConfigMap", "marker"))
	if v := metricstest.Value(t, reg, MetricOverflowed, "sink", "slow"); v < count-2 {
		t.Fatalf("overflowed{slow} = %v with a queue of 1 and %d changes held up, want at least %d", v, count+3, count-2)
	}
	if v, _ := metricstest.Find(t, reg, MetricFailed, "sink", "slow"); v != 0 {
		t.Errorf("failed{slow} = %v, want 0: a full queue is no failure", v)
	}

	down.Store(false)
	recv.waitFor(t, "/slow", "the marker after the recovery", is("Created", "ConfigMap", "marker"))
	got := recv.payloads("/slow")
	for _, name := range names {
		if c := countOf(got, "Created", name); c != 1 {
			t.Errorf("%s: created %d times on the slow sink, want 1", name, c)
		}
	}
	latest := false
	for _, p := range got {
		if p.EventMeta.Name == "cm-5" {
			latest = latest || p.Object["data"].(map[string]any)["v"] == "3"
		}
	}
	if !latest {
		t.Errorf("cm-5's latest state (v=3) never reached the slow sink:\n%s", summary(got))
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}
	if v := metricstest.Value(t, reg, MetricOverflowObjects, "sink", "slow"); v != 0 {
		t.Errorf("overflow objects{slow} = %v after the recovery, want 0", v)
	}
}

// A change still set aside (or queued) when the notifier stops is not in
// the checkpoint: the next start sends it.
func TestNotifier_AChangeAFullQueueHeldAtTheStopIsSentAfterTheRestart(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "notifier-overflow-restart")
	recv := newReceiver(t)
	slowURL, down := flaky(t, recv)
	logs := &logBuffer{}
	defer func() {
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()
	cfg := overflowConfig(ns, slowURL, recv.URL)
	start := func() func() {
		return runNotifier(t, cfg, Options{RetryBase: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, DrainTimeout: 100 * time.Millisecond}, logs)
	}

	stop := start()
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("cm-%d", i))
	}
	createConfigMaps(t, kc, ns, names...)
	createConfigMaps(t, kc, ns, "marker")
	recv.waitFor(t, "/up", "the marker on the healthy sink", is("Created", "ConfigMap", "marker"))
	stop() // the slow sink delivered nothing
	if got := recv.payloads("/slow"); len(got) != 0 {
		t.Fatalf("the slow sink's receiver was down, yet it received:\n%s", summary(got))
	}

	down.Store(false)
	stop = start()
	defer stop()
	// Order across objects after a restart is not promised: wait for each.
	for _, name := range append(names, "marker") {
		recv.waitFor(t, "/slow", "the create of "+name+" after the restart", is("Created", "ConfigMap", name))
	}
	got := recv.payloads("/slow")
	for _, name := range names {
		if c := countOf(got, "Created", name); c != 1 {
			t.Errorf("%s: created %d times on the slow sink after the restart, want 1", name, c)
		}
	}
}
