package kloop_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// Issue 38: a reconcile whose write the API server refuses as Invalid
// fails terminally (no retry) and shows on its object as a Warning event
// ReconcileFailed with the server's message.
func TestNewController_AnInvalidWriteIsTerminalAndAWarningEventOnTheObject(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "failures")
	logs := await.NewLogs()
	app, err := kloop.New(env.Config, kloop.Options{Name: "failer", Namespace: ns, Logger: slog.New(logs), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps})
	secrets := kloop.Objects[*corev1.Secret](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("secrets")})
	var calls atomic.Int32
	if _, err := kloop.NewController(app, "failer", func(ctx context.Context, key cache.Key) (controller.Result, error) {
		calls.Add(1)
		_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "Bad_Name!"}})
		return controller.Result{}, err
	}).For(cms).Complete(); err != nil {
		t.Fatal(err)
	}
	startApp(t, app)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Logged(t, "the reconcile of cm to fail terminally", logs, func(r await.Record) bool {
		return strings.Contains(r.Message, "terminal error; not retrying") && r.Attrs["key"] == ns+"/cm"
	})
	sel := metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": "cm", "reason": kloop.ReasonReconcileFailed}.String()}
	await.Watched(t, "a Warning ReconcileFailed event on cm", kc.CoreV1().Events(ns), sel, func(ctx context.Context) (bool, error) {
		l, err := kc.CoreV1().Events(ns).List(ctx, sel)
		if err != nil || len(l.Items) == 0 {
			return false, err
		}
		ev := l.Items[0]
		if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "ConfigMap" || !strings.Contains(ev.Message, "Bad_Name!") || strings.HasPrefix(ev.Message, controller.ErrTerminal.Error()) {
			t.Errorf("event %s %q about %s %s; want a Warning with the server's message about the ConfigMap", ev.Type, ev.Message, ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
		}
		return true, nil
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("%d reconciles of cm, want 1: an Invalid write is not retried", n)
	}
}
