package kloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/metrics/secure"
	"github.com/kloop-dev/kloop/testenv"
)

func TestNew_DebugAddrIsLoopbackOnlyUnlessSecured(t *testing.T) {
	if app := newApp(t, kloop.Options{}); app.Debug() != nil {
		t.Fatal("a debug page without DebugAddr")
	}
	if app := newApp(t, kloop.Options{DebugAddr: "0"}); app.Debug() != nil {
		t.Fatal(`a debug page with DebugAddr "0"`)
	}
	if app := newApp(t, kloop.Options{DebugAddr: "127.0.0.1:0"}); app.Debug() == nil {
		t.Fatal("no debug page with DebugAddr 127.0.0.1:0")
	}
	_, err := kloop.New(unreachable, kloop.Options{DebugAddr: ":8082", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if !errors.Is(err, debug.ErrInsecureAddr) || !strings.Contains(err.Error(), "DebugAddr") {
		t.Fatalf("New with an unsecured DebugAddr beyond loopback = %v, want debug.ErrInsecureAddr naming DebugAddr", err)
	}
	// Behind SecureMetrics (even with /metrics off) any address will do.
	if app := newApp(t, kloop.Options{DebugAddr: ":0", SecureMetrics: &secure.Options{}}); app.Debug() == nil {
		t.Fatal("no debug page with DebugAddr and SecureMetrics")
	}
}

func TestApp_DebugAddrServesTheAppsControllersAndInformers(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "app-debug")
	app, err := kloop.New(env.Config, kloop.Options{Name: "seer", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry(), DebugAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app)
	seen := make(chan string, 10)
	if _, err := kloop.NewController(app, "seer", func(_ context.Context, k cache.Key) (controller.Result, error) {
		seen <- k.Name
		return controller.Result{}, nil
	}).For(cms).Complete(); err != nil {
		t.Fatal(err)
	}
	runApp(t, app)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testwait.Receive(t, "a reconcile", seen); got != "one" {
		t.Fatalf("reconciled %q, want one", got)
	}
	// The one worker counts a reconcile after it returns: once it is in
	// the next one, the first is on the page.
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testwait.Receive(t, "a second reconcile", seen); got != "two" {
		t.Fatalf("reconciled %q, want two", got)
	}
	testwait.Closed(t, "the debug page's address", app.Debug().AddrReady())
	resp, err := http.Get(app.Debug().URL(debug.SnapshotPath))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Controllers []struct {
			Name       string
			Reconciles struct{ Success int }
		}
		Informers []struct {
			Resource string
			Synced   bool
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Controllers) != 1 || snap.Controllers[0].Name != "seer" || snap.Controllers[0].Reconciles.Success < 1 {
		t.Errorf("controllers on the page: %+v; want seer with a successful reconcile", snap.Controllers)
	}
	if len(snap.Informers) != 1 || snap.Informers[0].Resource != "configmaps.v1" || !snap.Informers[0].Synced {
		t.Errorf("informers on the page: %+v; want the synced configmaps informer", snap.Informers)
	}
}
