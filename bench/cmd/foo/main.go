// Command foo compares samples/foo (the kloop Foo controller) with a Foo
// controller written the sample-controller way on client-go, on one
// workload against a local control plane that it starts itself (package
// testenv, with kube-controller-manager, and samples/podsim in this
// process as the node):
//
//	N Foos (default 500, spec.replicas 1) are created in a fresh namespace
//	by 32 concurrent writers; the figure is the time from the first create
//	until every Foo has status.availableReplicas == spec.replicas, as seen
//	by a watch in this (the parent) process.
//
// The peer: a typed Deployment informer, a dynamic informer for Foos, a
// rate-limited workqueue with 2 workers; a sync creates the Deployment if
// missing, updates its replicas if different, and writes the Foo's status
// with UpdateStatus through the dynamic client on every sync. The kloop
// side is samples/foo (kloop.New and foo.Setup, 2 workers), which also
// records its Synced events.
//
// Each side runs in a child process of its own (this binary re-executed
// with -child). Rounds alternate the order (kloop first, then the peer
// first, ...). Each round is run twice: once with both sides at the same
// client QPS and burst, set high (-qps, -burst), and once with each
// side's defaults (rest.Config QPS and Burst left zero). A counting
// round-tripper in each child counts the side's API requests by verb; once
// every Foo has converged the parent asks the child for its figures, and
// the child reports them and its Go heap in use after two forced GCs
// (controller and caches still running), minus that of a child that does
// nothing (the binary's own baseline).
//
// Run with: cd bench && go run ./cmd/foo -n 500 [-settings same,defaults]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cgcache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	cgworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
)

const (
	writers = 32
	workers = 2
)

var foos = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}

func main() {
	n := flag.Int("n", 500, "Foos per round")
	rounds := flag.Int("rounds", 1, "rounds per side and client setting (the order alternates)")
	qps := flag.Float64("qps", 1000, "client QPS of both sides in the same-limits runs")
	burst := flag.Int("burst", 2000, "client burst of both sides in the same-limits runs")
	settings := flag.String("settings", "same,defaults", "client settings to run, in order: same (both at -qps and -burst), defaults (each side's own)")
	child := flag.String("child", "", "internal: run one side (kloop or client-go) as a child process")
	kubeconfig := flag.String("kubeconfig", "", "internal: the child's kubeconfig")
	namespace := flag.String("namespace", "", "internal: the child's namespace")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *child != "" {
		if err := runChild(*child, *kubeconfig, *namespace, float32(*qps), *burst); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	if err := runParent(*n, *rounds, float32(*qps), *burst, strings.Split(*settings, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "foo benchmark:", err)
		os.Exit(1)
	}
}

// measurement is one round of one side.
type measurement struct {
	seconds float64
	reqs    map[string]int64 // by verb
	heap    uint64
	rss     uint64
}

func (m measurement) total() int64 {
	var t int64
	for _, v := range m.reqs {
		t += v
	}
	return t
}

func (m measurement) events() int64 {
	var t int64
	for v, c := range m.reqs {
		if strings.HasPrefix(v, "event-") {
			t += c
		}
	}
	return t
}

func runParent(n, rounds int, qps float32, burst int, settings []string) error {
	for _, s := range settings {
		if s != "same" && s != "defaults" {
			return fmt.Errorf("-settings: %q is neither same nor defaults", s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{ControllerManager: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the writers and the watcher are limited by the server only
	if err := kloop.InstallCRD(ctx, cfg, foo.CRDYAML); err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var sim sync.WaitGroup
	simErr := make(chan error, 1)
	sim.Go(func() {
		simErr <- podsim.Run(ctx, cfg, podsim.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	})
	defer func() { cancel(); sim.Wait() }()

	fmt.Printf("foo benchmark: N=%d Foos (replicas 1), %d writers, %d workers per side, each side in its own child process, podsim as the node, GOMAXPROCS=%d\n",
		n, writers, workers, runtime.GOMAXPROCS(0))
	base, err := measureBaseline()
	if err != nil {
		return err
	}
	fmt.Printf("  baseline (this binary, nothing running) heap in use %.1f MiB\n", float64(base.heap)/(1<<20))

	round := 0
	for _, setting := range settings {
		label := fmt.Sprintf("both at QPS %.0f burst %d", qps, burst)
		if setting == "defaults" {
			label = "each side's defaults (rest.Config QPS and Burst zero)"
		}
		results := map[string][]measurement{}
		var order []string
		for r := range rounds {
			if (r+round)%2 == 0 {
				order = append(order, "kloop", "client-go")
			} else {
				order = append(order, "client-go", "kloop")
			}
		}
		round++
		for i, side := range order {
			select {
			case err := <-simErr:
				return fmt.Errorf("podsim: %v", err)
			default:
			}
			ns := fmt.Sprintf("foo-%s-%d-%s", setting, i, side)
			m, err := runRound(ctx, kc, dc, env.KubeconfigPath, side, ns, n, setting, qps, burst)
			if err != nil {
				return fmt.Errorf("%s, round %d (%s): %w", setting, i+1, side, err)
			}
			fmt.Printf("  %s: %-9s converged %6.2fs  requests %5d (%d to events) %v  heap in use %6.1f MiB  VmRSS %6.1f MiB\n",
				label, side, m.seconds, m.total(), m.events(), m.reqs, float64(m.heap)/(1<<20), float64(m.rss)/(1<<20))
			results[side] = append(results[side], m)
			if err := kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
		med := func(side string, f func(measurement) float64) float64 {
			var v []float64
			for _, m := range results[side] {
				v = append(v, f(m))
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		sec := func(m measurement) float64 { return m.seconds }
		req := func(m measurement) float64 { return float64(m.total()) }
		heap := func(m measurement) float64 { return float64(m.heap) - float64(base.heap) }
		suffix := ""
		if setting == "defaults" {
			suffix = "-defaults"
		}
		for _, r := range []struct {
			name, unit string
			f          func(measurement) float64
		}{{"foo-converge-seconds", "s", sec}, {"foo-api-requests", "requests", req}, {"foo-rss-bytes", "B", heap}} {
			k, p := med("kloop", r.f), med("client-go", r.f)
			fmt.Printf("RESULT %s%s kloop=%.3f peer=%.3f ratio=%.2f unit=%s peer_name=client-go-sample-controller\n", r.name, suffix, k, p, k/p, r.unit)
		}
		fmt.Printf("# %s; foo-rss-bytes is retained Go heap (heap in use after GC at convergence, minus the baseline child's)\n", label)
	}
	return nil
}

func measureBaseline() (measurement, error) {
	var best measurement
	for i := range 3 {
		out, err := exec.Command(os.Args[0], "-child", "baseline").Output()
		if err != nil {
			return measurement{}, fmt.Errorf("baseline child: %w", err)
		}
		var m measurement
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "MEM heap_inuse=%d rss=%d", &m.heap, &m.rss); err != nil {
			return measurement{}, fmt.Errorf("baseline child said %q: %w", out, err)
		}
		if i == 0 || m.heap < best.heap {
			best = m
		}
	}
	return best, nil
}

// runRound starts a child for side in ns, creates n Foos once it is
// synced, waits until every Foo has converged, and collects the child's
// figures.
func runRound(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, kubeconfig, side, ns string, n int, setting string, qps float32, burst int) (measurement, error) {
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return measurement{}, err
	}
	if setting == "defaults" {
		qps, burst = 0, 0
	}
	cmd := exec.Command(os.Args[0], "-child", side, "-kubeconfig", kubeconfig, "-namespace", ns,
		"-qps", strconv.FormatFloat(float64(qps), 'f', -1, 32), "-burst", strconv.Itoa(burst))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return measurement{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return measurement{}, err
	}
	if err := cmd.Start(); err != nil {
		return measurement{}, err
	}
	defer func() {
		stdin.Close() // the child exits on EOF
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	expect := func(prefix string) (string, error) {
		if !lines.Scan() {
			return "", fmt.Errorf("child ended before %q: %v", prefix, lines.Err())
		}
		l := lines.Text()
		if !strings.HasPrefix(l, prefix) {
			return "", fmt.Errorf("child said %q, want %q", l, prefix)
		}
		return strings.TrimSpace(strings.TrimPrefix(l, prefix)), nil
	}
	if _, err := expect("READY"); err != nil {
		return measurement{}, err
	}

	// The parent's own watch decides convergence.
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Minute)
	defer wcancel()
	converged := make(chan time.Time, 1)
	watchErr := make(chan error, 1)
	go func() { watchErr <- watchConverged(wctx, dc, ns, n, converged) }()

	first := time.Now()
	if err := createFoos(ctx, dc, ns, n); err != nil {
		return measurement{}, err
	}
	var at time.Time
	select {
	case at = <-converged:
	case err := <-watchErr:
		return measurement{}, fmt.Errorf("waiting for convergence: %w", err)
	}
	if _, err := io.WriteString(stdin, "REPORT\n"); err != nil {
		return measurement{}, err
	}
	reqs, err := expect("REQS")
	if err != nil {
		return measurement{}, err
	}
	mem, err := expect("MEM")
	if err != nil {
		return measurement{}, err
	}
	m := measurement{seconds: at.Sub(first).Seconds(), reqs: map[string]int64{}}
	for _, f := range strings.Fields(reqs) {
		verb, count, _ := strings.Cut(f, "=")
		c, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			return measurement{}, fmt.Errorf("parse %q: %w", reqs, err)
		}
		m.reqs[verb] = c
	}
	if _, err := fmt.Sscanf(mem, "heap_inuse=%d rss=%d", &m.heap, &m.rss); err != nil {
		return measurement{}, fmt.Errorf("parse %q: %w", mem, err)
	}
	return m, nil
}

// watchConverged sends the time at which every one of n Foos in ns has
// status.availableReplicas == spec.replicas.
func watchConverged(ctx context.Context, dc dynamic.Interface, ns string, n int, converged chan<- time.Time) error {
	done := map[string]bool{}
	count := 0
	rv := ""
	for {
		w, err := dc.Resource(foos).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			want, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			have, found, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
			ok = found && have == want
			if ok != done[u.GetName()] {
				done[u.GetName()] = ok
				if ok {
					count++
				} else {
					count--
				}
			}
			if count == n {
				w.Stop()
				converged <- time.Now()
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d Foos converged: %w", count, n, ctx.Err())
		}
	}
}

func createFoos(ctx context.Context, dc dynamic.Interface, ns string, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "samplecontroller.k8s.io/v1alpha1",
					"kind":       "Foo",
					"metadata":   map[string]any{"name": fmt.Sprintf("foo-%05d", i)},
					"spec":       map[string]any{"deploymentName": fmt.Sprintf("dep-%05d", i), "replicas": int64(1)},
				}}
				if _, err := dc.Resource(foos).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// counter is a round-tripper counting requests by verb.
type counter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	v := verb(r)
	if strings.Contains(r.URL.Path, "/events") {
		v = "event-" + v // the kloop side records Events; the peer does not
	}
	c.mu.Lock()
	c.n[v]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s []string
	for v, n := range c.n {
		s = append(s, fmt.Sprintf("%s=%d", v, n))
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

// verb is the Kubernetes verb of a request: GET is watch, list or get by
// the query and the path (a collection or one object).
func verb(r *http.Request) string {
	switch r.Method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	case http.MethodGet:
	default:
		return strings.ToLower(r.Method)
	}
	if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
		return "watch"
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	default:
		return "get" // discovery, version
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) <= 1 {
		return "list"
	}
	return "get"
}

// runChild runs one side until stdin closes: READY once synced, then on
// the line REPORT, REQS (its requests by verb so far) and MEM.
func runChild(side, kubeconfig, ns string, qps float32, burst int) error {
	if side == "baseline" {
		printMem()
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	c := &counter{n: map[string]int64{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wait func() error
	switch side {
	case "kloop":
		wait, err = runKloop(ctx, cfg, ns)
	case "client-go":
		wait, err = runClientGo(ctx, cfg, ns)
	default:
		err = fmt.Errorf("unknown side %q", side)
	}
	if err != nil {
		return err
	}
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "REPORT" {
			fmt.Println("REQS", c.String())
			printMem()
		}
	}
	cancel()
	return wait()
}

func printMem() {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("MEM heap_inuse=%d rss=%d\n", ms.HeapInuse, vmRSS())
}

func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// runKloop sets up samples/foo on a kloop.App and returns once its caches
// have synced.
func runKloop(ctx context.Context, cfg *rest.Config, ns string) (wait func() error, err error) {
	app, err := kloop.New(cfg, kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), Namespace: ns,
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		return nil, err
	}
	if err := foo.Setup(app, workers); err != nil {
		return nil, err
	}
	errs := make(chan error, 1)
	go func() { errs <- app.Run(ctx) }()
	wait = func() error { return <-errs }
	if err := app.Factory().WaitForSync(ctx); err != nil {
		return nil, errors.Join(err, wait())
	}
	return wait, nil
}

// runClientGo is the sample-controller way on client-go, with a dynamic
// client and informer for Foos.
func runClientGo(ctx context.Context, cfg *rest.Config, ns string) (wait func() error, err error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kf := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	depInformer := kf.Apps().V1().Deployments()
	depLister := depInformer.Lister()
	fooInformer := df.ForResource(foos)
	fooLister := fooInformer.Lister()
	queue := cgworkqueue.NewTypedRateLimitingQueueWithConfig(
		cgworkqueue.DefaultTypedControllerRateLimiter[cgcache.ObjectName](),
		cgworkqueue.TypedRateLimitingQueueConfig[cgcache.ObjectName]{Name: "foos"})
	enqueue := func(obj any) {
		if ref, err := cgcache.ObjectToName(obj); err == nil {
			queue.Add(ref)
		}
	}
	if _, err := fooInformer.Informer().AddEventHandler(cgcache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	handleOwned := func(obj any) {
		if t, ok := obj.(cgcache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, err := metav1.Object(nil), error(nil)
		if d, ok := obj.(*appsv1.Deployment); ok {
			m = d
		} else {
			err = errors.New("not a Deployment")
		}
		if err != nil {
			return
		}
		if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "Foo" {
			if _, err := fooLister.ByNamespace(m.GetNamespace()).Get(ref.Name); err == nil {
				queue.Add(cgcache.ObjectName{Namespace: m.GetNamespace(), Name: ref.Name})
			}
		}
	}
	if _, err := depInformer.Informer().AddEventHandler(cgcache.ResourceEventHandlerFuncs{
		AddFunc: handleOwned,
		UpdateFunc: func(old, cur any) {
			if old.(*appsv1.Deployment).ResourceVersion != cur.(*appsv1.Deployment).ResourceVersion {
				handleOwned(cur)
			}
		},
		DeleteFunc: handleOwned,
	}); err != nil {
		return nil, err
	}
	syncFoo := func(ctx context.Context, ref cgcache.ObjectName) error {
		obj, err := fooLister.ByNamespace(ref.Namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		f := obj.(*unstructured.Unstructured)
		name, _, _ := unstructured.NestedString(f.Object, "spec", "deploymentName")
		if name == "" {
			return nil // sample-controller logs and drops it
		}
		replicas, hasReplicas, _ := unstructured.NestedInt64(f.Object, "spec", "replicas")
		dep, err := depLister.Deployments(ref.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			dep, err = kc.AppsV1().Deployments(ref.Namespace).Create(ctx, newDeployment(f, name, replicas, hasReplicas), metav1.CreateOptions{})
		}
		if err != nil {
			return err
		}
		if !metav1.IsControlledBy(dep, f) {
			return fmt.Errorf(foo.MessageResourceExists, dep.Name)
		}
		if hasReplicas && (dep.Spec.Replicas == nil || int64(*dep.Spec.Replicas) != replicas) {
			dep, err = kc.AppsV1().Deployments(ref.Namespace).Update(ctx, newDeployment(f, name, replicas, hasReplicas), metav1.UpdateOptions{})
			if err != nil {
				return err
			}
		}
		cp := f.DeepCopy()
		if err := unstructured.SetNestedField(cp.Object, int64(dep.Status.AvailableReplicas), "status", "availableReplicas"); err != nil {
			return err
		}
		_, err = dc.Resource(foos).Namespace(ref.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		return err
	}
	kf.Start(ctx.Done())
	df.Start(ctx.Done())
	var wg sync.WaitGroup
	wait = func() error {
		queue.ShutDown()
		wg.Wait()
		kf.Shutdown()
		df.Shutdown()
		return nil
	}
	if !cgcache.WaitForCacheSync(ctx.Done(), depInformer.Informer().HasSynced, fooInformer.Informer().HasSynced) {
		return nil, errors.Join(errors.New("client-go caches did not sync"), wait())
	}
	for range workers {
		wg.Go(func() {
			for {
				ref, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := syncFoo(ctx, ref); err != nil {
					queue.AddRateLimited(ref)
				} else {
					queue.Forget(ref)
				}
				queue.Done(ref)
			}
		})
	}
	return wait, nil
}

// newDeployment is sample-controller's: nginx pods labelled app=nginx and
// controller=<foo>, owned by the Foo.
func newDeployment(f *unstructured.Unstructured, name string, replicas int64, hasReplicas bool) *appsv1.Deployment {
	lbls := map[string]string{"app": "nginx", "controller": f.GetName()}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: f.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(f, schema.GroupVersionKind{Group: foos.Group, Version: foos.Version, Kind: "Foo"})},
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: foo.NginxImage}}},
			},
		},
	}
	if hasReplicas {
		d.Spec.Replicas = ptr.To(int32(replicas))
	}
	return d
}
