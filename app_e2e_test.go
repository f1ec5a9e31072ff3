package kloop_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// runApp runs app until the test ends and checks that Run returns nil.
func runApp(t *testing.T, app *kloop.App) {
	t.Helper()
	testwait.Run(t, "App.Run", app.Run)
}

func TestApp_ControllerReadsItsOwnWritesRecordsEventsAndServesItsMetrics(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "app")
	reg := prometheus.NewRegistry()
	app, err := kloop.New(env.Config, kloop.Options{Name: "copier", Namespace: ns, Logger: quiet(), Registry: reg, MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app) // found through discovery
	var creates atomic.Int32
	// For every ConfigMap "x" keep a ConfigMap "x-copy"; each source is
	// reconciled many times in a row (it is requeued), and read-your-writes
	// makes every reconcile after the create see the copy.
	copier := func(ctx context.Context, key cache.Key) (controller.Result, error) {
		if strings.HasSuffix(key.Name, "-copy") {
			return controller.Result{}, nil
		}
		src, err := cms.Get(ctx, key.Namespace, key.Name)
		if apierrors.IsNotFound(err) {
			return controller.Result{}, nil
		}
		if err != nil {
			return controller.Result{}, err
		}
		if _, err := cms.Get(ctx, key.Namespace, key.Name+"-copy"); apierrors.IsNotFound(err) {
			cp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-copy"}, Data: src.Data}
			if _, err := cms.Create(ctx, cp); err != nil {
				return controller.Result{}, err
			}
			creates.Add(1)
			app.Recorder().Event(src, corev1.EventTypeNormal, "Copied", "made "+cp.Name)
		} else if err != nil {
			return controller.Result{}, err
		}
		return controller.Result{RequeueAfter: time.Millisecond}, nil
	}
	if _, err := kloop.NewController(app, "copier", copier).For(cms).Workers(2).Complete(); err != nil {
		t.Fatal(err)
	}
	if got := cms.GVR().Resource; got != "configmaps" {
		t.Fatalf("discovered resource %q, want configmaps", got)
	}
	runApp(t, app)

	ctx := t.Context()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var events *corev1.EventList
	copied := metav1.ListOptions{FieldSelector: "reason=Copied"}
	await.Watched(t, "3 Copied events", kc.CoreV1().Events(ns), copied, func(ctx context.Context) (bool, error) {
		var err error
		events, err = kc.CoreV1().Events(ns).List(ctx, copied)
		return err == nil && len(events.Items) == 3, err
	})
	for _, e := range events.Items {
		if e.ReportingController != "copier" {
			t.Errorf("event reported by %q, want the App's name copier", e.ReportingController)
		}
	}
	list, err := kc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, cm := range list.Items {
		if strings.HasSuffix(cm.Name, "-copy") {
			copies++
		}
	}
	if copies != 3 || creates.Load() != 3 {
		t.Errorf("%d copies on the server after %d creates, want 3 and 3 (a create per source)", copies, creates.Load())
	}

	// The one registry is where the controller's metrics are and what
	// /metrics serves.
	resp, err := http.Get("http://" + app.Manager().Status().MetricsAddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `controller_runtime_reconcile_total{controller="copier"`) {
		t.Errorf("/metrics lacks the copier's reconcile counter:\n%.2000s", body)
	}
	if app.Manager().Status().HealthAddr != nil {
		t.Error("a health server listens without HealthAddr")
	}
}

func TestObjects_AKindTheServerDoesNotServeSaysToInstallItsCRD(t *testing.T) {
	env := controlPlane.Env(t)
	app, err := kloop.New(env.Config, kloop.Options{Scheme: foo.Scheme(), Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	foos := kloop.Objects[*v1alpha1.Foo](app) // no CRD installed in this package's control plane
	if err := foos.Err(); err == nil || !strings.Contains(err.Error(), "install its CRD") {
		t.Fatalf("Objects[*v1alpha1.Foo] = %v, want an error saying to install its CRD", err)
	}
}
