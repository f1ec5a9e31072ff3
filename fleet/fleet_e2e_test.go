package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/fleet"
	"github.com/kloop-dev/kloop/internal/kubeconfig"
	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// setupFleetFoo declares the Foo sample's reconciler over the App's fleet:
// each key's Foo is read, and its Deployment made, in the key's cluster.
func setupFleetFoo(app *fleet.Fleet) error {
	foos := fleet.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	deps := fleet.Objects[*appsv1.Deployment](app).WithTransform(foo.LeanDeployment)
	_, err := fleet.NewController(app, "fleet-foo", func(ctx context.Context, k fleet.Key) (controller.Result, error) {
		c := app.Cluster(k.Cluster)
		if c == nil {
			return controller.Result{}, nil
		}
		r := foo.Reconciler{Foos: foos.In(k.Cluster), Deployments: deps.In(k.Cluster), Recorder: c.Recorder(), Logger: c.Logger()}
		return r.Reconcile(ctx, k.Key)
	}).For(foos).Owns(deps).Workers(2).Complete()
	return err
}

// fleetCluster is one control plane of the fleet test, seen by the test.
type fleetCluster struct {
	name string
	env  *testenv.Env
	kc   kubernetes.Interface
	foos *client.Resource[*v1alpha1.Foo]
	dyn  dynamic.Interface
}

func newFleetCluster(t *testing.T, name string, env *testenv.Env, ns string) *fleetCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	kc := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}
	return &fleetCluster{name: name, env: env, kc: kc, foos: foos, dyn: dynamic.NewForConfigOrDie(env.Config)}
}

// createFoo creates a Foo whose Deployment is named after the Foo.
func (c *fleetCluster) createFoo(t *testing.T, ns, name string) *v1alpha1.Foo {
	t.Helper()
	f, err := c.foos.Create(t.Context(), &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.FooSpec{DeploymentName: name + "-dep", Replicas: ptr.To[int32](1)},
	})
	if err != nil {
		t.Fatalf("create Foo %s in %s: %v", name, c.name, err)
	}
	return f
}

// converged waits until the Foo's Deployment exists in this cluster,
// controlled by the Foo, and the Foo's status reports on it.
func (c *fleetCluster) converged(t *testing.T, ns string, f *v1alpha1.Foo) {
	t.Helper()
	await.Object(t, "Deployment of Foo "+f.Name+" in cluster "+c.name, c.kc.AppsV1().Deployments(ns), f.Spec.DeploymentName, func(d *appsv1.Deployment) bool {
		return metav1.IsControlledBy(d, f)
	})
	await.Object(t, "status of Foo "+f.Name+" in cluster "+c.name, c.dyn.Resource(v1alpha1.Resource).Namespace(ns), f.Name, func(got *unstructured.Unstructured) bool {
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		return observed == got.GetGeneration() && len(conds) > 0
	})
}

// counterValue is the value of the counter name{cluster=cluster} in reg,
// 0 if it has none.
func counterValue(t *testing.T, reg *prometheus.Registry, name, cluster string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func kubeconfigBytes(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kubeconfig.Write(path, cfg); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// heapAndGoroutines measures the process after a full collection.
func heapAndGoroutines() (heap uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

// TestFleet_OneFooControllerOverManyClusters runs one Foo controller over
// a fleet of control planes of its own: the home cluster "a", two from a
// kubeconfig directory ("b", and "c" through a fault proxy), and clusters
// added at run time through kubeconfig Secrets in the home cluster ("d",
// and bad ones). The subtests share them and run in order.
func TestFleet_OneFooControllerOverManyClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("needs four control planes (not started with -short)")
	}
	envs := make([]*testenv.Env, 4) // a (home), b, c, d; no controller manager: a Foo converges without pods
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() { envs[i], errs[i] = testenv.Start(context.Background(), testenv.Options{}) })
	}
	wg.Wait()
	for i, e := range envs {
		if e != nil {
			t.Cleanup(e.Stop)
		}
		if errs[i] != nil {
			t.Fatalf("start control plane %d: %v", i, errs[i])
		}
	}
	home := envs[0]
	ns := "fleet-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	a := newFleetCluster(t, "a", home, ns)
	b := newFleetCluster(t, "b", envs[1], ns)
	c := newFleetCluster(t, "c", envs[2], ns)
	d := newFleetCluster(t, "d", envs[3], ns)
	proxyC := envs[2].APIServerProxy(t)

	dir := t.TempDir()
	if err := kubeconfig.Write(filepath.Join(dir, "b.kubeconfig"), b.env.Config); err != nil {
		t.Fatal(err)
	}
	if err := kubeconfig.Write(filepath.Join(dir, "c.kubeconfig"), proxyC.RESTConfig(c.env.Config)); err != nil {
		t.Fatal(err)
	}
	const label = "kloop.dev/fleet-e2e"
	logs := await.NewLogs()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the App's logs:\n%s", logs)
		}
	})
	reg := prometheus.NewRegistry()
	app, err := kloop.New(home.Config, kloop.Options{
		Name:       "fleet-foo",
		Scheme:     foo.Scheme(),
		Namespace:  ns,
		Registry:   reg,
		Logger:     slog.New(logs),
		HealthAddr: "127.0.0.1:0",
		DebugAddr:  "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := fleet.New(app, fleet.Options{
		Home:           "a",
		KubeconfigDir:  dir,
		SecretSelector: label + "=true",
		SyncTimeout:    5 * time.Second,
		RetryMax:       2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setupFleetFoo(fl); err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "fleet App", app.Run)
	testwait.Closed(t, "fleet caches synced", app.Manager().Synced())

	clusters := []*fleetCluster{a, b, c}
	t.Run("FoosInEachClusterConvergeThere", func(t *testing.T) {
		start := time.Now()
		foos := make([]*v1alpha1.Foo, len(clusters))
		for i, cl := range clusters {
			foos[i] = cl.createFoo(t, ns, "first-"+cl.name)
		}
		for i, cl := range clusters {
			cl.converged(t, ns, foos[i])
		}
		t.Logf("three Foos, one per cluster, converged in %v", time.Since(start))
		for _, cl := range clusters {
			for _, other := range clusters {
				if other == cl {
					continue
				}
				if _, err := other.kc.AppsV1().Deployments(ns).Get(t.Context(), "first-"+cl.name+"-dep", metav1.GetOptions{}); err == nil {
					t.Errorf("the Deployment of cluster %s's Foo was made in cluster %s too", cl.name, other.name)
				}
			}
		}
	})

	t.Run("EachClustersInformerMetricsAreServedWithItsName", func(t *testing.T) {
		rec := httptest.NewRecorder()
		app.Manager().Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("/metrics: %d\n%s", rec.Code, rec.Body)
		}
		for _, cl := range clusters {
			want := `kloop_informer_objects{cluster="` + cl.name + `",`
			found := false
			for line := range strings.Lines(rec.Body.String()) {
				if strings.HasPrefix(line, want) && strings.Contains(line, "foos") {
					found = true
				}
			}
			if !found {
				t.Errorf("/metrics has no series of cluster %s's Foo informer (%s...)", cl.name, want)
			}
		}
		if !strings.Contains(rec.Body.String(), `kloop_fleet_cluster_joined{cluster="b"} 1`) {
			t.Error("/metrics lost the fleet App's own series")
		}
	})

	t.Run("ABlackholedClusterDoesNotSlowTheOthers", func(t *testing.T) {
		// round creates a Foo in a and in b and waits until both converge.
		round := func(prefix string) time.Duration {
			start := time.Now()
			fa, fb := a.createFoo(t, ns, prefix+"-a"), b.createFoo(t, ns, prefix+"-b")
			a.converged(t, ns, fa)
			b.converged(t, ns, fb)
			return time.Since(start)
		}
		before := round("before")
		proxyC.Set(testenv.Fault{Blackhole: true})
		unblock := sync.OnceFunc(func() { proxyC.Set(testenv.Fault{}) })
		defer unblock()
		fc := c.createFoo(t, ns, "during-c") // straight to c, not through the proxy
		during := round("during")
		t.Logf("Foos in a and b converged in %v with c blackholed, %v before", during, before)
		if limit := 2*before + 250*time.Millisecond; during > limit {
			t.Errorf("with c blackholed, Foos in a and b converged in %v, want within 2x the %v before (+0.25s)", during, before)
		}
		if _, err := c.kc.AppsV1().Deployments(ns).Get(t.Context(), fc.Spec.DeploymentName, metav1.GetOptions{}); err == nil {
			t.Error("c's Foo was reconciled while c was blackholed: the blackhole did not hold")
		}
		unblock()
		start := time.Now()
		c.converged(t, ns, fc)
		t.Logf("c's Foo, created while it was blackholed, converged %v after the path returned", time.Since(start))
	})

	t.Run("ASecretAddsAClusterAndDeletingItStopsIt", func(t *testing.T) {
		fd := d.createFoo(t, ns, "before-join")
		heap0, g0 := heapAndGoroutines()
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns, Labels: map[string]string{label: "true"}},
			Data:       map[string][]byte{"kubeconfig": kubeconfigBytes(t, d.env.Config)},
		}
		start := time.Now()
		if _, err := a.kc.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		d.converged(t, ns, fd)
		took := time.Since(start)
		t.Logf("from the Secret's creation to cluster d's existing Foo converged: %v", took)
		if took > 10*time.Second {
			t.Errorf("cluster d's existing Foo converged %v after its Secret was created, want within 10s", took)
		}
		if fl.Cluster("d") == nil {
			t.Fatal("App.Cluster(d) is nil after d's Foo was reconciled")
		}
		heap1, g1 := heapAndGoroutines()
		t.Logf("cluster d joined: heap %d -> %d bytes, goroutines %d -> %d", heap0, heap1, g0, g1)

		if err := a.kc.CoreV1().Secrets(ns).Delete(t.Context(), "d", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		await.Logged(t, "cluster d left", logs, func(r await.Record) bool {
			return r.Message == "Fleet: cluster left" && r.Attrs["cluster"] == "d"
		})
		if fl.Cluster("d") != nil {
			t.Error("App.Cluster(d) is not nil after d left")
		}
		heap2, g2 := heapAndGoroutines()
		t.Logf("cluster d left: heap %d bytes, goroutines %d (before it joined: %d bytes, %d)", heap2, g2, heap0, g0)
		if float64(g2) > 1.1*float64(g0) {
			t.Errorf("goroutines after d left: %d, want within 10%% of %d before it joined (%d while joined)", g2, g0, g1)
		}
		if float64(heap2) > 1.1*float64(heap0) {
			t.Errorf("heap after d left: %d bytes, want within 10%% of %d before it joined (%d while joined)", heap2, heap0, heap1)
		}
	})

	t.Run("BadSecretsAreReportedAndTheOthersGoOn", func(t *testing.T) {
		badCA := rest.CopyConfig(d.env.Config)
		badCA.CAData = b.env.Config.CAData                // another control plane's CA
		noRights, err := d.env.UserConfig("fleet-nobody") // authenticated, but RBAC grants nothing
		if err != nil {
			t.Fatal(err)
		}
		// d has left the fleet; without its Foo CRD it lacks a kind the controller watches.
		crds := apiextensions.NewForConfigOrDie(d.env.Config).ApiextensionsV1().CustomResourceDefinitions()
		if err := crds.Delete(t.Context(), "foos.samplecontroller.k8s.io", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		await.Gone(t, "d's Foo CRD", crds, "foos.samplecontroller.k8s.io")
		bad := map[string]struct {
			data    []byte
			context string
			reason  string
			says    string
		}{
			"bad-parse":   {[]byte("clusters: [oops"), "", "KubeconfigInvalid", "does not parse"},
			"bad-context": {kubeconfigBytes(t, d.env.Config), "elsewhere", "KubeconfigInvalid", `no context "elsewhere"`},
			"bad-ca":      {kubeconfigBytes(t, badCA), "", "ClusterUnavailable", "certificate-authority-data does not match"},
			"bad-token":   {tokenKubeconfig(t, d.env.Config, "not-a-token"), "", "ClusterUnavailable", "refused the kubeconfig's credentials"},
			"no-rights":   {kubeconfigBytes(t, noRights), "", "ClusterUnavailable", "forbidden"},
			"no-crd":      {kubeconfigBytes(t, d.env.Config), "", "ClusterUnavailable", "install its CRD"},
		}
		for name, s := range bad {
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{label: "true"}},
				Data:       map[string][]byte{"kubeconfig": s.data},
			}
			if s.context != "" {
				secret.Annotations = map[string]string{"kloop.dev/kubeconfig-context": s.context}
			}
			if _, err := a.kc.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Meanwhile the others go on.
		fb := b.createFoo(t, ns, "beside-bad-secrets")
		b.converged(t, ns, fb)

		for name, s := range bad {
			await.Watched(t, s.reason+" event on Secret "+name, a.kc.EventsV1().Events(ns), metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
				evs, err := a.kc.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				return hasEvent(evs.Items, name, s.reason, s.says), nil
			})
			if counterValue(t, reg, "kloop_fleet_cluster_failures_total", name) == 0 {
				t.Errorf("kloop_fleet_cluster_failures_total{cluster=%q} = 0, want > 0", name)
			}
		}
		resp, err := http.Get("http://" + app.Manager().Status().HealthAddr.String() + "/readyz?verbose")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz = %d with clusters failing, want 200 (the default policy): %s", resp.StatusCode, body)
		}
		for _, want := range []string{"bad-parse: invalid", "bad-context: invalid", "bad-ca: failed", "does not match", "bad-token: failed", "no-rights: failed", "no-crd: failed", "a: joined", "b: joined", "c: joined"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/readyz?verbose does not say %q:\n%s", want, body)
			}
		}
		var snap struct {
			Clusters []struct{ Name, State, LastError, Level string }
		}
		resp, err = http.Get(app.Debug().URL(debug.SnapshotPath))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		levels := map[string]string{}
		for _, c := range snap.Clusters {
			levels[c.Name] = c.Level
			if c.Name == "bad-ca" && !strings.Contains(c.LastError, "does not match") {
				t.Errorf("debug snapshot: bad-ca's last error %q does not say the CA does not match", c.LastError)
			}
		}
		for name := range bad {
			if levels[name] != "bad" {
				t.Errorf("debug snapshot: cluster %s has level %q, want bad (clusters: %+v)", name, levels[name], snap.Clusters)
			}
		}
		if levels["b"] == "bad" || levels["b"] == "" {
			t.Errorf("debug snapshot: cluster b has level %q, want it listed and not bad", levels["b"])
		}
		for name := range bad {
			if err := a.kc.CoreV1().Secrets(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// tokenKubeconfig is a kubeconfig for cfg's server and CA with a bearer
// token instead of cfg's credentials.
func tokenKubeconfig(t *testing.T, cfg *rest.Config, token string) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func hasEvent(evs []eventsv1.Event, object, reason, says string) bool {
	for _, ev := range evs {
		if ev.Regarding.Kind == "Secret" && ev.Regarding.Name == object && ev.Reason == reason && strings.Contains(ev.Note, says) {
			return true
		}
	}
	return false
}
