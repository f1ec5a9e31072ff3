package notifier

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
)

// runNotifier starts a notifier with cfg and opts, logging to logs, and
// waits until it is synced; stop stops it and waits for Run to return.
func runNotifier(t *testing.T, cfg Config, opts Options, logs *logBuffer) (stop func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	n, err := New(newApp(t, controlPlane.Env(t).Config, kloop.Options{Logger: logs.Logger(), Registry: reg}), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := runSynced(t, n, logs)
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Run did not return within 60s of the stop")
		}
	}
}

// Downtime: what changed while the notifier was stopped is notified when
// it is back (50 creates, 50 updates, 50 deletes, exactly), and nothing it
// notified before the stop is sent again; for both kinds of checkpoint.
func TestNotifier_ChangesWhileStoppedAreNotifiedOnceAfterTheRestart(t *testing.T) {
	for _, kind := range []string{CheckpointConfigMap, CheckpointFile} {
		t.Run(kind, func(t *testing.T) {
			e := controlPlane.Env(t)
			kc := kubernetes.NewForConfigOrDie(e.Config)
			ctx := t.Context()
			ns := testenv.NewNamespace(t, kc, "notifier-downtime")
			cms := kc.CoreV1().ConfigMaps(ns)
			recv := newReceiver(t)
			logs := &logBuffer{}
			defer func() {
				if t.Failed() {
					t.Logf("notifier logs:\n%s", logs)
				}
			}()
			ck := CheckpointConfig{Type: kind}
			if kind == CheckpointFile {
				ck.Path = filepath.Join(t.TempDir(), "checkpoint")
			}
			cfg := func(path string) Config {
				return Config{Namespace: ns, Resources: []string{"configmap"}, Checkpoint: ck,
					Sinks: []SinkConfig{{Name: "hook", Type: SinkWebhook, URL: recv.URL + path}}}
			}

			// Before the first start: not notified (no checkpoint yet).
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			stop := runNotifier(t, cfg("/first"), Options{}, logs)
			const n = 50
			for i := range n {
				for _, prefix := range []string{"keep", "change", "drop"} {
					if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := range n {
				for _, prefix := range []string{"keep", "change", "drop"} {
					recv.waitFor(t, "/first", "create before the stop", is("Created", "ConfigMap", fmt.Sprintf("%s-%d", prefix, i)))
				}
			}
			stop()
			if got := len(recv.payloads("/first")); got != 3*n {
				t.Fatalf("before the stop: %d notifications, want %d:\n%s", got, 3*n, summary(recv.payloads("/first")))
			}

			// While down: 50 created, 50 changed, 50 deleted, and one
			// status-free no-op (labels set and removed again).
			for i := range n {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				c, err := cms.Get(ctx, fmt.Sprintf("change-%d", i), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				c.Data["v"] = "2"
				if _, err := cms.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := cms.Delete(ctx, fmt.Sprintf("drop-%d", i), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			k, err := cms.Get(ctx, "keep-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			k.Labels = map[string]string{"x": "y"}
			if k, err = cms.Update(ctx, k, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			k.Labels = nil
			if _, err = cms.Update(ctx, k, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}

			stop = runNotifier(t, cfg("/second"), Options{}, logs)
			defer stop()
			// A marker after the restart: once it arrived, every
			// notification of the restart has (one sink, in order).
			for i := range n {
				recv.waitFor(t, "/second", "create while down", is("Created", "ConfigMap", fmt.Sprintf("new-%d", i)))
				recv.waitFor(t, "/second", "update while down", is("Updated", "ConfigMap", fmt.Sprintf("change-%d", i)))
				recv.waitFor(t, "/second", "delete while down", is("Deleted", "ConfigMap", fmt.Sprintf("drop-%d", i)))
			}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			recv.waitFor(t, "/second", "the marker", is("Created", "ConfigMap", "marker"))

			var got []string
			for _, p := range recv.payloads("/second") {
				got = append(got, p.EventMeta.Reason+" "+p.EventMeta.Name)
			}
			var want []string
			for i := range n {
				want = append(want, fmt.Sprintf("Created new-%d", i), fmt.Sprintf("Updated change-%d", i), fmt.Sprintf("Deleted drop-%d", i))
			}
			want = append(want, "Created marker")
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("after the restart got %d notifications, want exactly the %d changes made while down and the marker:\n%s",
					len(got), len(want), summary(recv.payloads("/second")))
			}
		})
	}
}
