package debug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// fooRun is the Foo controller in one namespace of a control plane, run
// by the builder with the debug page on a free loopback port
// (kloop.Options.DebugAddr).
type fooRun struct {
	t    *testing.T
	env  *testenv.Env
	kc   kubernetes.Interface
	foos *client.Resource[*v1alpha1.Foo]
	ns   string
	reg  *prometheus.Registry
	srv  *debug.Server
	logs *await.Buffer
	// changed is notified after every log line of the controller (each
	// failed reconcile logs one) and every event its Deployment informer
	// hands out: what moves the snapshot's counts.
	changed await.Signal
}

// notifier is an io.Writer that only notifies sig.
type notifier struct{ sig *await.Signal }

func (n notifier) Write(p []byte) (int, error) { n.sig.Notify(); return len(p), nil }

// Names of the Foo controller's informers and controller on the page.
const (
	fooResource        = "foos.v1alpha1.samplecontroller.k8s.io"
	deploymentResource = "deployments.v1.apps"
)

// newFooRun installs the Foo CRD, makes a namespace and creates the Foos
// named in before (deploymentName = the Foo's name) before the controller
// starts, then starts it.
func newFooRun(t *testing.T, env *testenv.Env, before ...string) *fooRun {
	t.Helper()
	return newFooRunWith(t, env, nil, before...)
}

// newFooRunWith is newFooRun with the App's options changed by with.
func newFooRunWith(t *testing.T, env *testenv.Env, with func(*kloop.Options), before ...string) *fooRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(env.Config)
	r := &fooRun{t: t, env: env, kc: kc, foos: foos, ns: testenv.NewNamespace(t, kc, "debug"), reg: prometheus.NewRegistry(), logs: &await.Buffer{}}
	for _, name := range before {
		r.createFoo(name, name)
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(r.logs, notifier{&r.changed}), nil))
	opts := kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), Namespace: r.ns, Logger: log, Registry: r.reg,
		DebugAddr: "127.0.0.1:0"}
	if with != nil {
		with(&opts)
	}
	app, err := kloop.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := foo.Setup(app, foo.DefaultWorkers); err != nil {
		t.Fatal(err)
	}
	// The Foo controller's own Deployment informer (the App shares one per
	// resource): its handlers run once the cache has the change.
	notify := func() { r.changed.Notify() }
	if _, err := kloop.Objects[*appsv1.Deployment](app).Informer().AddHandler(informer.HandlerFuncs[*appsv1.Deployment]{
		AddFunc:    func(*appsv1.Deployment, bool) { notify() },
		UpdateFunc: func(_, _ *appsv1.Deployment) { notify() },
		DeleteFunc: func(*appsv1.Deployment, bool) { notify() },
	}, informer.HandlerOptions{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	r.srv = app.Debug()
	t.Cleanup(func() {
		if t.Failed() { // after the stop below: the logs are complete
			t.Logf("controller logs:\n%s", r.logs)
		}
	})
	testwait.Run(t, "App.Run", app.Run)
	select {
	case <-r.srv.AddrReady():
	case <-time.After(30 * time.Second):
		t.Fatal("the debug server did not bind within 30s")
	}
	if r.srv.URL(debug.PagePath) == "" {
		t.Fatal("the debug server failed to listen")
	}
	return r
}

func (r *fooRun) createFoo(name, deployment string) {
	r.t.Helper()
	f := &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}, Spec: v1alpha1.FooSpec{DeploymentName: deployment}}
	if _, err := r.foos.Create(r.t.Context(), f); err != nil {
		r.t.Fatal(err)
	}
}

// takenDeployment creates a Deployment that no Foo controls.
func (r *fooRun) takenDeployment(name string) {
	r.t.Helper()
	d := foo.NewDeployment(&v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}, Spec: v1alpha1.FooSpec{DeploymentName: name}})
	d.OwnerReferences = nil
	if _, err := r.kc.AppsV1().Deployments(r.ns).Apply(r.t.Context(), d, metav1.ApplyOptions{FieldManager: "someone-else"}); err != nil {
		r.t.Fatal(err)
	}
}

// counts are the Foos and Deployments the API server holds in the
// namespace.
func (r *fooRun) counts(ctx context.Context) (foos, deployments int) {
	r.t.Helper()
	fl, _, err := r.foos.List(ctx, r.ns, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	dl, err := r.kc.AppsV1().Deployments(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return len(fl), len(dl.Items)
}

// informerName is the name the Foo controller's factory gives the
// informer of resource in the run's namespace.
func (r *fooRun) informerName(resource string) string {
	return fmt.Sprintf("%s [namespace=%s]", resource, r.ns)
}

// snapshotJSON fetches the snapshot endpoint, decoded without the debug
// package's types, the way a script reads it.
func (r *fooRun) snapshotJSON() map[string]any {
	r.t.Helper()
	resp, err := http.Get(r.srv.URL(debug.SnapshotPath))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		r.t.Fatalf("GET snapshot: %d, %v", resp.StatusCode, err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		r.t.Fatalf("snapshot is not JSON: %v", err)
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
