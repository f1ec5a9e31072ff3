package foo_test

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/watcher"
)

// The Foo controller started before the Foo CRD exists: ready for its
// other parts, reporting Foo as waiting; the CRD installed, an existing Foo
// converges within 10 s; the CRD deleted, the Foo informer's list and watch
// and the controller's reconciles stop, with no error in the log; installed
// again, it resumes. It has a control plane of its own: the package's
// others share the Foo CRD this test deletes.
func TestFoo_WaitsForItsCRDAndStopsAndResumesWithIt(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	kc := kubernetes.NewForConfigOrDie(env.Config)
	crds := apiextensions.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	ns := testenv.NewNamespace(t, kc, "late")
	logs := await.NewLogs()
	app, err := kloop.New(env.Config, kloop.Options{
		Name: foo.ControllerName, Scheme: foo.Scheme(), Namespace: ns, WaitForKinds: true, // as foo.Run sets it
		HealthAddr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0", Logger: slog.New(logs), Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := foo.Setup(app, foo.DefaultWorkers); err != nil {
		t.Fatal(err)
	}
	await.Run(t, "the Foo controller", app.Run)
	await.Closed(t, "the App ready with the Foo CRD missing", app.Manager().Synced())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	})
	readyz := "http://" + app.Manager().Status().HealthAddr.String() + "/readyz?verbose"
	waiting := "waiting for kind Foo samplecontroller.k8s.io/v1alpha1: not served"

	code, body := get(t, readyz)
	if code != http.StatusOK || !strings.Contains(body, "[+]caches ok") || !strings.Contains(body, waiting) {
		t.Fatalf("/readyz?verbose = %d:\n%s\nwant 200, the caches ok and %q", code, body, waiting)
	}
	if _, snap := get(t, app.Debug().URL(debug.SnapshotPath)); !strings.Contains(snap, waiting) {
		t.Errorf("the debug page's snapshot does not name the waiting kind (%q):\n%.3000s", waiting, snap)
	}

	// Bad input: a program that takes Foo for cluster-scoped, found out
	// once the CRD is installed; it keeps waiting and says what to fix.
	wrongLogs := await.NewLogs()
	wrong, err := kloop.New(env.Config, kloop.Options{Name: "wrong", Scheme: foo.Scheme(), WaitForKinds: true,
		Logger: slog.New(wrongLogs), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if h := kloop.Objects[*v1alpha1.Foo](wrong, kloop.ObjectsOptions{ClusterScoped: true}); h.Err() != nil {
		t.Fatalf("Objects of a kind not served, with WaitForKinds: %v, want it to wait", h.Err())
	}
	await.Run(t, "the App that takes Foo for cluster-scoped", wrong.Run)

	// Installed: an existing Foo converges within 10 s.
	c, err := client.New(env.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}
	installed := installFoo(t, env.Config, foos, ns, "early")
	await.Object(t, "Deployment early made after the CRD is installed", kc.AppsV1().Deployments(ns), "early", func(*appsv1.Deployment) bool { return true })
	took := time.Since(installed)
	t.Logf("from the CRD installed to the existing Foo's Deployment: %v", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the existing Foo's Deployment came %v after the CRD was installed, want within 10s", took)
	}
	await.Logged(t, "the cluster-scoped Foo's App told what to fix", wrongLogs, func(r await.Record) bool {
		return r.Message == "Waiting for kind" && strings.Contains(r.Attrs["reason"],
			"served as a namespaced resource, but the App watches it as cluster-scoped: drop ObjectsOptions.ClusterScoped")
	})
	if _, body := get(t, readyz); !strings.Contains(body, "kinds: every kind served") {
		t.Errorf("/readyz?verbose with the CRD installed:\n%s\nwant \"kinds: every kind served\"", body)
	}

	// Deleted: the informer empties and stops listing and watching, the
	// controller stops reconciling, and nothing loops in the log.
	deleted := time.Now()
	if err := crds.Delete(t.Context(), "foos."+v1alpha1.GroupName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Gone(t, "the Foo CRD deleted", crds, "foos."+v1alpha1.GroupName)
	shut := await.Logged(t, "the Foo kind reported gone", logs, func(r await.Record) bool {
		return r.Time.After(deleted) && r.Message == "Kind not served: its informers are emptied and its controllers hold until it is served"
	})
	before := fooInformer(t, app)
	if before.Source.Phase != watcher.PhaseWaiting || before.Objects != 0 || before.Source.LastError == nil ||
		!strings.Contains(before.Source.LastError.Error(), waiting) {
		t.Errorf("Foo informer with the CRD deleted: phase %v, %d objects, error %v; want waiting, empty, %q",
			before.Source.Phase, before.Objects, before.Source.LastError, waiting)
	}
	probes := probesSoFar(logs)
	await.Logged(t, "three discovery probes while the Foo CRD is gone", logs, func(r await.Record) bool {
		return r.Message == "Asked discovery for kind" && r.Attrs["probes"] == strconv.Itoa(probes+3)
	})
	after := fooInformer(t, app)
	if after.Source.Lists != before.Source.Lists || after.Source.Watches != before.Source.Watches {
		t.Errorf("the Foo informer listed %d and watched %d times while its CRD was gone, want none",
			after.Source.Lists-before.Source.Lists, after.Source.Watches-before.Source.Watches)
	}
	reconciles := 0
	for _, r := range logs.Records() {
		if r.Time.After(shut.Time) && r.Message == await.ReconciledMessage {
			reconciles++
		}
	}
	if reconciles != 0 {
		t.Errorf("%d reconciles while the Foo CRD was gone, want none", reconciles)
	}
	if code, body := get(t, readyz); code != http.StatusOK || !strings.Contains(body, waiting) {
		t.Errorf("/readyz?verbose with the CRD deleted = %d:\n%s\nwant 200 and %q", code, body, waiting)
	}

	// Installed again: it resumes.
	installFoo(t, env.Config, foos, ns, "later")
	await.Object(t, "Deployment later made after the CRD is installed again", kc.AppsV1().Deployments(ns), "later", func(*appsv1.Deployment) bool { return true })

	// No error loop: nothing at warning level or above once the kind was
	// gone, no reflector error, and no line logged twice. (A reconcile in
	// flight when the CRD goes may fail once: its Foo is deleted under it.)
	seen := map[string]int{}
	for _, r := range logs.Records() {
		if r.Level < slog.LevelWarn {
			continue
		}
		seen[r.Message+" "+r.Attrs["key"]+" "+r.Attrs["err"]]++
		if r.Time.After(shut.Time) || r.Message == "reflector error" {
			t.Errorf("logged: %s", r)
		}
	}
	for line, n := range seen {
		if n > 1 {
			t.Errorf("logged %d times: %s", n, line)
		}
	}
	t.Logf("warnings and errors over the run: %d", len(seen))
}

// installFoo installs the Foo CRD, creates a Foo named name (its
// Deployment too) and returns when the CRD was served.
func installFoo(t *testing.T, cfg *rest.Config, foos *client.Resource[*v1alpha1.Foo], ns, name string) time.Time {
	t.Helper()
	if err := manifest.InstallCRD(t.Context(), cfg, foo.CRDYAML); err != nil {
		t.Fatal(err)
	}
	served := time.Now()
	f := newFoo(name, name, ptr.To[int32](1))
	f.Namespace = ns
	if _, err := foos.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	return served
}

func fooInformer(t *testing.T, app *kloop.App) informer.Status {
	t.Helper()
	for _, st := range app.Factory().Status() {
		if r := v1alpha1.Resource; st.Resource == r.Resource+"."+r.Version+"."+r.Group { // as the debug page names it

			return st
		}
	}
	t.Fatalf("no Foo informer in %v", app.Factory().Status())
	return informer.Status{}
}

// probesSoFar is the latest count of discovery probes logged.
func probesSoFar(logs *await.Logs) int {
	n := 0
	for _, r := range logs.Records() {
		if r.Message == "Asked discovery for kind" {
			n, _ = strconv.Atoi(r.Attrs["probes"])
		}
	}
	return n
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
