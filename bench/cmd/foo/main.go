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
// The control plane is not to be what is measured: kube-controller-manager
// runs at client QPS -kcm-qps and burst -kcm-burst with -kcm-syncs
// Deployment and ReplicaSet workers, podsim with -node-workers, and the
// writers and watches of this process without a client limit. Each round's
// namespace is deleted, and waited for, before the next round starts. Per
// round the parent prints what the time is made of: for each Foo, when it
// was created, when its Deployment appeared, when that was available and
// when the Foo's status said so (median, 90th percentile and maximum of
// each step, and when the last Foo reached each), and each child prints
// its syncs and the time its workers spent in them.
//
// The peer (sample-controller's controller.go on client-go): typed
// informers (the Foo one built as sample-controller's generated informer
// is, on a typed client for samples/foo's v1alpha1 types), a rate-limited
// workqueue with 2 workers; a sync creates the Deployment if missing,
// updates its replicas if different, writes the Foo's status with
// UpdateStatus on every sync and, as sample-controller does, records a
// Synced event through client-go's event broadcaster (-peer-events=false
// leaves that out). The kloop side is samples/foo (kloop.New and
// foo.Setup, 2 workers).
//
// Each side runs in a child process of its own (this binary re-executed
// with -child). Rounds alternate the order (kloop first, then the peer
// first, ...). -settings same runs both sides at the same client QPS and
// burst, set high (-qps, -burst); -settings defaults runs each side with
// its own defaults: kloop's foo-controller has no client-side limit,
// client-go's rest.Config takes 5 QPS and burst 10 per client. A counting
// round-tripper in each child counts the side's API requests by verb; once
// every Foo has converged the parent asks the child for its figures, and
// the child reports them and its Go heap in use after two forced GCs
// (controller and caches still running), minus that of a child that does
// nothing (the binary's own baseline). -memprofile writes each child's
// heap profile then.
//
// Run with: cd bench && go run ./cmd/foo -n 500 [-settings same,defaults] [-rounds 2]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	cgcache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	cgrecord "k8s.io/client-go/tools/record"
	cgworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/bench/internal/childproc"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
)

const (
	writers = 32
	workers = 2
	// kloopDefaultQPS and kloopDefaultBurst are cmd/foo-controller's
	// --kube-api-qps and --kube-api-burst defaults (cli.DefaultQPS and
	// cli.DefaultBurst: no client-side limit), the kloop side's own in
	// the defaults setting. Package cli is not imported, to keep its
	// dependencies out of this module.
	kloopDefaultQPS   = -1
	kloopDefaultBurst = 30
)

var foos = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}

func main() {
	n := flag.Int("n", 500, "Foos per round")
	rounds := flag.Int("rounds", 1, "rounds per side and client setting (the order alternates)")
	qps := flag.Float64("qps", 1000, "client QPS of both sides in the same-limits runs")
	burst := flag.Int("burst", 2000, "client burst of both sides in the same-limits runs")
	settings := flag.String("settings", "same,defaults", "client settings to run, in order: same (both at -qps and -burst), defaults (each side's own)")
	kcmQPS := flag.Int("kcm-qps", 1000, "kube-controller-manager's --kube-api-qps (its default is 20)")
	kcmBurst := flag.Int("kcm-burst", 2000, "kube-controller-manager's --kube-api-burst (its default is 30)")
	kcmSyncs := flag.Int("kcm-syncs", 20, "kube-controller-manager's --concurrent-deployment-syncs and --concurrent-replicaset-syncs (default 5 each)")
	nodeWorkers := flag.Int("node-workers", 16, "podsim workers (pods bound and made ready at once)")
	memprofile := flag.String("memprofile", "", "directory for each child's heap profile (inuse, after GC, at convergence): <side>-<setting>-<i>.pprof")
	child := flag.String("child", "", "internal: run one side (kloop or client-go) as a child process")
	kubeconfig := flag.String("kubeconfig", "", "internal: the child's kubeconfig")
	namespace := flag.String("namespace", "", "internal: the child's namespace")
	profile := flag.String("profile", "", "internal: the child's heap profile file")
	diagnose := flag.Bool("diagnose", false, "kloop's side also sums its waits for its cache to catch up with its own writes (enables its debug logs, which costs a little)")
	peerEvents := flag.Bool("peer-events", true, "the peer records a Synced event on every sync, as sample-controller does")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *child != "" {
		if err := runChild(*child, *kubeconfig, *namespace, float32(*qps), *burst, *profile, *peerEvents, *diagnose); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	plane := controlPlane{kcmQPS: *kcmQPS, kcmBurst: *kcmBurst, kcmSyncs: *kcmSyncs, nodeWorkers: *nodeWorkers}
	if err := runParent(*n, *rounds, float32(*qps), *burst, strings.Split(*settings, ","), plane, *memprofile, *peerEvents, *diagnose); err != nil {
		fmt.Fprintln(os.Stderr, "foo benchmark:", err)
		os.Exit(1)
	}
}

// measurement is one round of one side.
type measurement struct {
	seconds float64
	reqs    map[string]int64 // by verb
	heap    uint64           // HeapInuse after GC
	live    uint64           // HeapAlloc after GC: the bytes of live objects, pprof's inuse_space
	rss     uint64
	phases  string // what the time is made of
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

// controlPlane is how fast the benchmark's own control plane makes
// ReplicaSets and Pods and makes them ready.
type controlPlane struct {
	kcmQPS, kcmBurst, kcmSyncs, nodeWorkers int
}

func (c controlPlane) kcmFlags() []string {
	return []string{
		"--kube-api-qps=" + strconv.Itoa(c.kcmQPS), "--kube-api-burst=" + strconv.Itoa(c.kcmBurst),
		"--concurrent-deployment-syncs=" + strconv.Itoa(c.kcmSyncs), "--concurrent-replicaset-syncs=" + strconv.Itoa(c.kcmSyncs),
	}
}

func runParent(n, rounds int, qps float32, burst int, settings []string, plane controlPlane, memprofile string, peerEvents, diagnose bool) error {
	for _, s := range settings {
		if s != "same" && s != "defaults" {
			return fmt.Errorf("-settings: %q is neither same nor defaults", s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{ControllerManager: true, ControllerManagerFlags: plane.kcmFlags(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the writers and the watcher are limited by the server only
	if err := manifest.InstallCRD(ctx, cfg, foo.CRDYAML); err != nil {
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
		simErr <- podsim.Run(ctx, cfg, podsim.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(), Workers: plane.nodeWorkers})
	})
	defer func() { cancel(); sim.Wait() }()

	fmt.Printf("foo benchmark: N=%d Foos (replicas 1), %d writers, %d workers per side, each side in its own child process, podsim as the node, GOMAXPROCS=%d\n",
		n, writers, workers, goruntime.GOMAXPROCS(0))
	fmt.Printf("  control plane: kube-controller-manager %s; podsim %d workers; the writers, the watches and podsim unthrottled (QPS -1)\n",
		strings.Join(plane.kcmFlags(), " "), plane.nodeWorkers)
	base, err := measureBaseline()
	if err != nil {
		return err
	}
	fmt.Printf("  baseline (this binary, nothing running) heap in use %.1f MiB, live %.1f MiB\n", float64(base.heap)/(1<<20), float64(base.live)/(1<<20))

	round := 0
	for _, setting := range settings {
		label := fmt.Sprintf("both at QPS %.0f burst %d", qps, burst)
		if setting == "defaults" {
			label = fmt.Sprintf("each side's defaults (kloop: foo-controller's --kube-api-qps %d, no client limit; client-go: rest.Config QPS and Burst zero, so 5 and 10 per client)", kloopDefaultQPS)
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
			prof := ""
			if memprofile != "" {
				prof = filepath.Join(memprofile, fmt.Sprintf("%s-%s-%d.pprof", side, setting, i))
			}
			m, err := runRound(ctx, kc, dc, env.KubeconfigPath, side, ns, n, setting, qps, burst, prof, peerEvents, diagnose)
			if err != nil {
				return fmt.Errorf("%s, round %d (%s): %w", setting, i+1, side, err)
			}
			fmt.Printf("  %s: %-9s converged %6.2fs  requests %5d (%d to events) %v  heap in use %6.1f MiB  live %6.1f MiB  VmRSS %6.1f MiB\n",
				label, side, m.seconds, m.total(), m.events(), m.reqs, float64(m.heap)/(1<<20), float64(m.live)/(1<<20), float64(m.rss)/(1<<20))
			fmt.Printf("    %s\n", m.phases)
			results[side] = append(results[side], m)
			if err := deleteNamespace(ctx, kc, ns); err != nil {
				return err
			}
		}
		med := func(side string, f func(measurement) float64) float64 {
			var v []float64
			for _, m := range results[side] {
				v = append(v, f(m))
			}
			slices.Sort(v)
			if len(v)%2 == 0 {
				return (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
			return v[len(v)/2]
		}
		sec := func(m measurement) float64 { return m.seconds }
		req := func(m measurement) float64 { return float64(m.total()) }
		heap := func(m measurement) float64 { return float64(m.heap) - float64(base.heap) }
		live := func(m measurement) float64 { return float64(m.live) - float64(base.live) }
		noEvents := func(m measurement) float64 { return float64(m.total() - m.events()) }
		suffix := ""
		if setting == "defaults" {
			suffix = "-defaults"
		}
		for _, r := range []struct {
			name, unit string
			f          func(measurement) float64
		}{{"foo-converge-seconds", "s", sec}, {"foo-api-requests", "requests", req}, {"foo-api-requests-without-events", "requests", noEvents},
			{"foo-rss-bytes", "B", heap}, {"foo-heap-live-bytes", "B", live}} {
			k, p := med("kloop", r.f), med("client-go", r.f)
			fmt.Printf("RESULT %s%s kloop=%.3f peer=%.3f ratio=%.2f unit=%s peer_name=client-go-sample-controller\n", r.name, suffix, k, p, k/p, r.unit)
		}
		fmt.Printf("# %s; medians over %d round(s) a side; foo-rss-bytes is the Go heap in use (HeapInuse: spans holding live objects) and foo-heap-live-bytes the live objects' bytes (HeapAlloc), both after GC at convergence minus the baseline child's\n", label, rounds)
	}
	return nil
}

// deleteNamespace deletes ns and waits until it is gone, so that the
// garbage collection of a round's objects does not load the next round.
func deleteNamespace(ctx context.Context, kc kubernetes.Interface, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	for {
		w, err := kc.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ns})
		if err != nil {
			return fmt.Errorf("wait for namespace %s to go: %w", ns, err)
		}
		if _, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			w.Stop()
			return nil
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("namespace %s still there: %w", ns, ctx.Err())
		}
	}
}

func measureBaseline() (measurement, error) {
	var best measurement
	for i := range 3 {
		out, err := exec.Command(os.Args[0], "-child", "baseline").Output()
		if err != nil {
			return measurement{}, fmt.Errorf("baseline child: %w", err)
		}
		var m measurement
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "MEM heap_inuse=%d heap_alloc=%d rss=%d", &m.heap, &m.live, &m.rss); err != nil {
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
func runRound(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, kubeconfig, side, ns string, n int, setting string, qps float32, burst int, profile string, peerEvents, diagnose bool) (measurement, error) {
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return measurement{}, err
	}
	if setting == "defaults" {
		qps, burst = 0, 0 // client-go's own: 5 and 10
		if side == "kloop" {
			qps, burst = kloopDefaultQPS, kloopDefaultBurst
		}
	}
	child, err := childproc.Start("-child", side, "-kubeconfig", kubeconfig, "-namespace", ns,
		"-qps", strconv.FormatFloat(float64(qps), 'f', -1, 32), "-burst", strconv.Itoa(burst), "-profile", profile, "-peer-events="+strconv.FormatBool(peerEvents), "-diagnose="+strconv.FormatBool(diagnose))
	if err != nil {
		return measurement{}, err
	}
	defer child.Close() // the child exits on EOF
	expect := child.Expect
	if _, err := expect("READY"); err != nil {
		return measurement{}, err
	}

	// The parent's own watch decides convergence.
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Minute)
	defer wcancel()
	converged := make(chan time.Time, 1)
	watchErr := make(chan error, 2)
	tl := newTimeline(n)
	go func() { watchErr <- watchConverged(wctx, dc, ns, n, tl, converged) }()
	go func() { watchErr <- watchDeployments(wctx, kc, ns, tl) }()

	before, err := serverRequests(ctx, kc)
	if err != nil {
		return measurement{}, err
	}
	first := time.Now()
	if err := createFoos(ctx, dc, ns, n, tl); err != nil {
		return measurement{}, err
	}
	var at time.Time
	select {
	case at = <-converged:
	case err := <-watchErr:
		return measurement{}, fmt.Errorf("waiting for convergence: %w", err)
	}
	after, err := serverRequests(ctx, kc)
	if err != nil {
		return measurement{}, err
	}
	if err := child.Send("REPORT"); err != nil {
		return measurement{}, err
	}
	reqs, err := expect("REQS")
	if err != nil {
		return measurement{}, err
	}
	wk, err := expect("WORK")
	if err != nil {
		return measurement{}, err
	}
	mem, err := expect("MEM")
	if err != nil {
		return measurement{}, err
	}
	m := measurement{seconds: at.Sub(first).Seconds(), reqs: map[string]int64{}, phases: tl.summary(first) + "\n    workers: " + wk +
		"\n    API server, everyone's requests until convergence: " + serverDelta(before, after, at.Sub(first))}
	for _, f := range strings.Fields(reqs) {
		verb, count, _ := strings.Cut(f, "=")
		c, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			return measurement{}, fmt.Errorf("parse %q: %w", reqs, err)
		}
		m.reqs[verb] = c
	}
	if _, err := fmt.Sscanf(mem, "heap_inuse=%d heap_alloc=%d rss=%d", &m.heap, &m.live, &m.rss); err != nil {
		return measurement{}, fmt.Errorf("parse %q: %w", mem, err)
	}
	return m, nil
}

// serverRequests returns the API server's apiserver_request_total by verb
// (all clients: the writers, both controllers, kube-controller-manager,
// podsim), watches left out.
func serverRequests(ctx context.Context, kc kubernetes.Interface) (map[string]float64, error) {
	raw, err := kc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		verb := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "verb" {
				verb = l.GetValue()
			}
		}
		if verb != "WATCH" {
			out[verb] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// serverDelta says how many requests the API server answered between two
// serverRequests, by verb, and how many a second.
func serverDelta(before, after map[string]float64, d time.Duration) string {
	var total float64
	var s []string
	for verb, v := range after {
		if n := v - before[verb]; n > 0 {
			total += n
			s = append(s, fmt.Sprintf("%s=%.0f", verb, n))
		}
	}
	slices.Sort(s)
	return fmt.Sprintf("%.0f (%.0f/s) %s", total, total/d.Seconds(), strings.Join(s, " "))
}

// watchConverged sends the time at which every one of n Foos in ns has
// status.availableReplicas == spec.replicas.
func watchConverged(ctx context.Context, dc dynamic.Interface, ns string, n int, tl *timeline, converged chan<- time.Time) error {
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
					tl.mark(u.GetName(), phaseConverged)
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

func createFoos(ctx context.Context, dc dynamic.Interface, ns string, n int, tl *timeline) error {
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
				tl.mark(u.GetName(), phaseCreated)
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
	took map[string]time.Duration // until the response's headers, watches excluded
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	v := verb(r)
	if strings.Contains(r.URL.Path, "/events") {
		v = "event-" + v // counted apart: Events are the recorders' writes
	}
	began := time.Now()
	resp, err := c.next.RoundTrip(r)
	c.mu.Lock()
	c.n[v]++
	if v != "watch" {
		c.took[v] += time.Since(began)
	}
	c.mu.Unlock()
	return resp, err
}

// latencies is the mean time to a response's headers by verb, in ms.
func (c *counter) latencies() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s []string
	for v, d := range c.took {
		s = append(s, fmt.Sprintf("%s=%.1f", v, d.Seconds()*1000/float64(c.n[v])))
	}
	slices.Sort(s)
	return "mean-ms-to-answer{" + strings.Join(s, " ") + "}"
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
func runChild(side, kubeconfig, ns string, qps float32, burst int, profile string, peerEvents, diagnose bool) error {
	if side == "baseline" {
		printMem()
		return nil
	}
	if profile != "" {
		goruntime.MemProfileRate = 4096 // fine enough to see a few MiB
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	c := &counter{n: map[string]int64{}, took: map[string]time.Duration{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wait func() error
	w := &work{}
	switch side {
	case "kloop":
		wait, err = runKloop(ctx, cfg, ns, w, diagnose)
	case "client-go":
		wait, err = runClientGo(ctx, cfg, ns, peerEvents, w)
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
			w.settle()
			fmt.Println("REQS", c.String())
			fmt.Println("WORK", w.String(), c.latencies(), cpuTime())
			printMem()
			if profile != "" {
				if err := writeHeapProfile(profile); err != nil {
					return err
				}
			}
		}
	}
	cancel()
	return wait()
}

func printMem() {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	fmt.Printf("MEM heap_inuse=%d heap_alloc=%d rss=%d\n", ms.HeapInuse, ms.HeapAlloc, vmRSS())
}

// writeHeapProfile writes the heap profile; printMem has just run two GCs,
// so its inuse figures are what is retained.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cpuTime is the CPU this process has used (user and system) since it
// started, which on this machine the API server, etcd and the rest did
// not have.
func cpuTime() string {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return "cpu=?"
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return fmt.Sprintf("cpu=%.2fs", d.Seconds())
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
func runKloop(ctx context.Context, cfg *rest.Config, ns string, w *work, diagnose bool) (wait func() error, err error) {
	w.reg, w.reconcileTimeName = prometheus.NewRegistry(), "controller_runtime_reconcile_time_seconds"
	w.idle = func() bool { return gauges(w.reg, "workqueue_depth", "controller_runtime_active_workers") == 0 }
	var log slog.Handler = slog.DiscardHandler
	if diagnose {
		log = waitCounter{w}
	}
	app, err := kloop.New(cfg, kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), Namespace: ns,
		Logger: slog.New(log), Registry: w.reg})
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

// runClientGo is the sample-controller way on client-go: typed informers
// (for Foos built as sample-controller's generated informer is, on a
// typed client for samples/foo's v1alpha1 types), a rate-limited
// workqueue, UpdateStatus on every sync, and, when events is true, a
// Synced event on every successful sync through client-go's event
// broadcaster (sample-controller's controller.go does both).
func runClientGo(ctx context.Context, cfg *rest.Config, ns string, events bool, w *work) (wait func() error, err error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	fc, err := newFooClient(cfg, ns)
	if err != nil {
		return nil, err
	}
	kf := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	depInformer := kf.Apps().V1().Deployments()
	depLister := depInformer.Lister()
	fooInformer := cgcache.NewSharedIndexInformer(&cgcache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return fc.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return fc.Watch(ctx, opts)
		},
	}, &v1alpha1.Foo{}, 0, cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
	fooLister := cgcache.NewGenericLister(fooInformer.GetIndexer(), v1alpha1.Resource.GroupResource())

	var recorder cgrecord.EventRecorder = nopRecorder{}
	var broadcaster cgrecord.EventBroadcaster
	if events {
		sch := runtime.NewScheme()
		if err := errors.Join(clientgoscheme.AddToScheme(sch), v1alpha1.AddToScheme(sch)); err != nil {
			return nil, err
		}
		broadcaster = cgrecord.NewBroadcaster(cgrecord.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
		recorder = broadcaster.NewRecorder(sch, corev1.EventSource{Component: "sample-controller"})
	}

	queue := cgworkqueue.NewTypedRateLimitingQueueWithConfig(
		cgworkqueue.DefaultTypedControllerRateLimiter[cgcache.ObjectName](),
		cgworkqueue.TypedRateLimitingQueueConfig[cgcache.ObjectName]{Name: "foos"})
	enqueue := func(obj any) {
		if ref, err := cgcache.ObjectToName(obj); err == nil {
			queue.Add(ref)
		}
	}
	if _, err := fooInformer.AddEventHandler(cgcache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	handleOwned := func(obj any) {
		if t, ok := obj.(cgcache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(d); ref != nil && ref.Kind == "Foo" {
			if _, err := fooLister.ByNamespace(d.Namespace).Get(ref.Name); err == nil {
				queue.Add(cgcache.ObjectName{Namespace: d.Namespace, Name: ref.Name})
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
		f := obj.(*v1alpha1.Foo)
		name := f.Spec.DeploymentName
		if name == "" {
			return nil // sample-controller logs and drops it
		}
		dep, err := depLister.Deployments(ref.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			dep, err = kc.AppsV1().Deployments(ref.Namespace).Create(ctx, newDeployment(f), metav1.CreateOptions{})
		}
		if err != nil {
			return err
		}
		if !metav1.IsControlledBy(dep, f) {
			msg := fmt.Sprintf(foo.MessageResourceExists, dep.Name)
			recorder.Event(f, corev1.EventTypeWarning, foo.ErrResourceExists, msg)
			return errors.New(msg)
		}
		if f.Spec.Replicas != nil && *f.Spec.Replicas != ptr.Deref(dep.Spec.Replicas, 1) {
			dep, err = kc.AppsV1().Deployments(ref.Namespace).Update(ctx, newDeployment(f), metav1.UpdateOptions{})
			if err != nil {
				return err
			}
		}
		cp := f.DeepCopy()
		cp.Status.AvailableReplicas = dep.Status.AvailableReplicas
		if _, err := fc.UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
			return err
		}
		recorder.Event(f, corev1.EventTypeNormal, foo.SuccessSynced, foo.MessageResourceSynced)
		return nil
	}
	var inFlight atomic.Int64
	w.idle = func() bool { return queue.Len() == 0 && inFlight.Load() == 0 }
	kf.Start(ctx.Done())
	go fooInformer.RunWithContext(ctx)
	var wg sync.WaitGroup
	wait = func() error {
		queue.ShutDown()
		wg.Wait()
		kf.Shutdown()
		if broadcaster != nil {
			broadcaster.Shutdown()
		}
		return nil
	}
	if !cgcache.WaitForCacheSync(ctx.Done(), depInformer.Informer().HasSynced, fooInformer.HasSynced) {
		return nil, errors.Join(errors.New("client-go caches did not sync"), wait())
	}
	for range workers {
		wg.Go(func() {
			for {
				ref, shutdown := queue.Get()
				if shutdown {
					return
				}
				began := time.Now()
				inFlight.Add(1)
				err := syncFoo(ctx, ref)
				inFlight.Add(-1)
				w.sync(time.Since(began))
				if err != nil {
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

// newFooClient is what sample-controller's generated clientset gives for
// Foos in ns: a typed client on a REST client of its own (so with its own
// client rate limiter, as the generated clientset has).
func newFooClient(cfg *rest.Config, ns string) (*gentype.ClientWithList[*v1alpha1.Foo, *v1alpha1.FooList], error) {
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return gentype.NewClientWithList[*v1alpha1.Foo, *v1alpha1.FooList]("foos", rc, runtime.NewParameterCodec(sch), ns,
		func() *v1alpha1.Foo { return &v1alpha1.Foo{} }, func() *v1alpha1.FooList { return &v1alpha1.FooList{} }), nil
}

// nopRecorder records nothing (the peer with -peer-events=false).
type nopRecorder struct{ cgrecord.EventRecorder }

func (nopRecorder) Event(runtime.Object, string, string, string) {}

// newDeployment is sample-controller's: nginx pods labelled app=nginx and
// controller=<foo>, owned by the Foo.
func newDeployment(f *v1alpha1.Foo) *appsv1.Deployment {
	lbls := map[string]string{"app": "nginx", "controller": f.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: f.Spec.DeploymentName, Namespace: f.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(f, v1alpha1.Kind)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: f.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: foo.NginxImage}}},
			},
		},
	}
}
