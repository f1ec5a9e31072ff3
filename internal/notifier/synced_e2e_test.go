package notifier

import (
	"fmt"
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

// Synced promises that changes from then on are notified. A change to an
// object whose initial add the handler has not yet taken would merge into
// that add and be suppressed with it, so Synced must wait for the handlers
// to have taken the whole initial list, not only for the caches.
func TestNotifier_SyncedMeansTheHandlersHaveTakenTheInitialList(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-synced")
	const existing = 300
	for i := range existing {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		reg := prometheus.NewRegistry()
		logs := &logBuffer{}
		n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: reg}), Config{
			Namespace: ns,
			Resources: []string{"configmap"},
			Sinks:     []SinkConfig{{Type: SinkLog}},
		}, Options{Out: &logBuffer{}})
		if err != nil {
			t.Fatal(err)
		}
		done, stop := runSynced(t, n, logs)
		got, _ := metricstest.Find(t, reg, MetricSuppressed, "resourceType", "ConfigMap", "reason", "initial")
		stop()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("Run did not return within 60s of the stop")
		}
		if got < existing {
			t.Fatalf("at Synced the handler had taken %v of the %d objects of the initial list", got, existing)
		}
	}
}
