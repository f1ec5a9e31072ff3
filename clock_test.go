package kloop_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/kloopfake"
	"github.com/kloop-dev/kloop/metrics"
	"github.com/kloop-dev/kloop/testenv"
)

// armedClock is a fake clock that tells when a timer is armed on it: a
// controller's queue arms one for a key requeued for later, so a test
// steps the clock once the requeue is in, without polling.
type armedClock struct {
	*clocktesting.FakeClock
	armed chan time.Duration
}

func (c armedClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	select {
	case c.armed <- d:
	default:
	}
	return t
}

// A reconcile runs "at" the time of the App's clock, and a key it requeues
// for an hour is reconciled again as soon as the fake clock is stepped by
// an hour: no wall-clock wait. On kloopfake's server and on a real one.
func TestApp_ClockIsTheTimeOfReconcilesAndOfRequeueAfter(t *testing.T) {
	t.Run("kloopfake", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "office"}}
		srv, err := kloopfake.NewServer(kloopfake.Options{Objects: []runtime.Object{cm}})
		if err != nil {
			t.Fatal(err)
		}
		testClock(t, srv.Config(), "")
	})
	t.Run("control plane", func(t *testing.T) {
		env := controlPlane.Env(t)
		kc := kubernetes.NewForConfigOrDie(env.Config)
		ns := testenv.NewNamespace(t, kc, "clock")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "office"}}
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testClock(t, env.Config, ns)
	})
}

// testClock runs an App with a fake clock on cfg (watching namespace, ""
// for all) that holds one ConfigMap.
func testClock(t *testing.T, cfg *rest.Config, namespace string) {
	sleepAt := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	clk := armedClock{clocktesting.NewFakeClock(sleepAt), make(chan time.Duration, 16)}
	app, err := kloop.New(cfg, kloop.Options{Name: "sleeper", Namespace: namespace, Clock: clk, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan time.Time, 4)
	_, err = kloop.NewController(app, "sleeper", func(ctx context.Context, key cache.Key) (controller.Result, error) {
		now := app.Options().Clock.Now()
		seen <- now
		if now.Before(sleepAt.Add(time.Hour)) {
			return controller.Result{RequeueAfter: time.Hour}, nil // wake up in an hour
		}
		return controller.Result{}, nil
	}).For(kloop.Objects[*corev1.ConfigMap](app)).Complete()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	next := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-seen:
			return at
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s within 30 s", what)
			return time.Time{}
		}
	}
	if at := next("first reconcile"); !at.Equal(sleepAt) {
		t.Fatalf("the first reconcile read %v from the App's clock, want the fake clock's %v", at, sleepAt)
	}
	select {
	case d := <-clk.armed:
		if d != time.Hour {
			t.Fatalf("the queue armed a timer of %v on the App's clock, want the hour of RequeueAfter", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the controller's queue armed no timer on the App's clock within 30 s: RequeueAfter does not follow Options.Clock")
	}
	clk.Step(time.Hour)
	if at := next("reconcile after the fake clock was stepped by the hour of RequeueAfter"); !at.Equal(sleepAt.Add(time.Hour)) {
		t.Fatalf("the second reconcile read %v, want %v", at, sleepAt.Add(time.Hour))
	}
}

// What user code reads of App.Options is what the App uses: the metrics
// registry and the clock are never nil, on an App of any cluster (here
// one that is never called) and on one of kloopfake's server.
func TestApp_OptionsHoldTheRegistryAndClockInUse(t *testing.T) {
	srv, err := kloopfake.NewServer(kloopfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	apps := map[string]func() (*kloop.App, error){
		"real":      func() (*kloop.App, error) { return kloop.New(unreachable, kloop.Options{Logger: quiet()}) },
		"kloopfake": func() (*kloop.App, error) { return kloop.New(srv.Config(), kloop.Options{Logger: quiet()}) },
	}
	for name, newApp := range apps {
		app, err := newApp()
		if err != nil {
			t.Fatal(err)
		}
		opts := app.Options()
		if opts.Registry != metrics.Registry {
			t.Errorf("%s App: Options().Registry = %p, want the kloop registry %p it registers on", name, opts.Registry, metrics.Registry)
		}
		if _, ok := opts.Clock.(clock.RealClock); !ok {
			t.Errorf("%s App: Options().Clock = %T, want the real clock", name, opts.Clock)
		}
	}
	own := prometheus.NewRegistry()
	app, err := kloop.New(srv.Config(), kloop.Options{Logger: quiet(), Registry: own})
	if err != nil {
		t.Fatal(err)
	}
	if app.Options().Registry != own {
		t.Error("Options().Registry is not the registry given")
	}
	if _, err := kloop.NewController(app, "counted", func(context.Context, cache.Key) (controller.Result, error) {
		return controller.Result{}, nil
	}).For(kloop.Objects[*corev1.ConfigMap](app)).Complete(); err != nil {
		t.Fatal(err)
	}
	families, err := app.Options().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		found = found || f.GetName() == "controller_runtime_reconcile_total"
	}
	if !found {
		t.Error("the controller's metrics are not on Options().Registry")
	}
}
