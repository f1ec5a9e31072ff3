package kloop_test

import (
	"context"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
)

// A controller keyed by a type of its own: Watches maps each ConfigMap to
// the team its label names, and reconcile gets the team.
func TestNewKeyedController_ReconcilesTheKeysItsWatchesMapTo(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "keyed")
	app, err := kloop.New(env.Config, kloop.Options{Name: "teams", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps})
	teams := make(chan string, 16)
	reconcile := func(_ context.Context, team string) (controller.Result, error) {
		select {
		case teams <- team:
		default: // the test reads the first few; reconcile must not block
		}
		return controller.Result{}, nil
	}
	team := func(cm *corev1.ConfigMap) []string {
		if t := cm.Labels["team"]; t != "" {
			return []string{t}
		}
		return nil
	}
	c, err := kloop.NewKeyedController(app, "teams", reconcile).Watches(kloop.MapTo(cms, team)).Workers(2).Complete()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "teams" {
		t.Errorf("controller name %q, want teams", c.Name())
	}
	startApp(t, app)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "blue-settings", Labels: map[string]string{"team": "blue"}}}
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testwait.Receive(t, "a reconcile of the team", teams); got != "blue" {
		t.Errorf("reconciled %q, want blue (the ConfigMap's team)", got)
	}
}
