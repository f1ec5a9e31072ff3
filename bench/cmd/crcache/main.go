// Command crcache measures a controller-runtime manager on its default
// cache against the same manager on kloop's (crcache.NewCache, the one
// line): the cold-start peak RSS, the heap retained once synced, the first
// sync and a reconcile load.
//
// It starts a control plane (testenv), seeds ConfigMaps (512-byte payload,
// two labels) and Pod-shaped objects (about 3 KiB as stored; each owned by
// one of the ConfigMaps) in one namespace, and runs each side in a child
// process of its own (this binary again, with -child), so that no side
// inherits another's heap. A side is a manager with one controller, For
// ConfigMaps and Owns Pods, whose reconciler reads the ConfigMap and its
// Pod from the cache (the manager's client: deep copies). The child
// reports once every ConfigMap has been reconciled:
//
//   - crcache-peak-rss-bytes: the process's RSS high-water mark (VmHWM)
//     then, the figure a container's memory limit sees;
//   - crcache-retained-bytes: the Go heap after two GCs, minus the heap
//     before the manager started;
//   - crcache-sync-seconds: from the manager's start to its cache's sync;
//   - crcache-reconcile-seconds: from the cache's sync to the last
//     ConfigMap's first reconcile.
//
// Each RESULT line gives the median of the rounds, kloop against
// controller-runtime:
//
//	RESULT crcache-peak-rss-bytes kloop=... peer=... ratio=... unit=B peer_name=controller-runtime
//
// With -encoded, kloop's encoded cache (informer.Memory.Encoded) is a third
// side, reported as crcache-encoded-*.
//
//	cd bench && go run ./cmd/crcache -configmaps 100000 -pods 10000
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kloop-dev/kloop/bench/internal/childproc"
	"github.com/kloop-dev/kloop/crcache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
)

const namespace = "bench"

// report is what a child measured.
type report struct {
	PeakRSS   int64 `json:"peakRSS"`
	Retained  int64 `json:"retained"`
	Sync      int64 `json:"syncNanos"`
	Reconcile int64 `json:"reconcileNanos"`
	// The cost of a read through the cache, measured after the rest:
	// a Get of a ConfigMap and of a Pod, deep copied (the default) and
	// not (UnsafeDisableDeepCopy), in nanoseconds.
	GetConfigMap, GetConfigMapNoCopy int64
	GetPod, GetPodNoCopy             int64
}

// sides are the managers measured: controller-runtime's default cache,
// kloop's (crcache.NewCache) and, with -encoded, kloop's encoded cache
// (crcache.NewCacheWith and informer.Memory.Encoded).
var sides = []string{"controller-runtime", "kloop"}

func main() {
	configMaps := flag.Int("configmaps", 100000, "ConfigMaps to seed (the controller's For kind)")
	pods := flag.Int("pods", 10000, "Pod-shaped objects to seed, each owned by a ConfigMap (the controller's Owns kind)")
	rounds := flag.Int("rounds", 1, "rounds (each runs every side once, in a child process each)")
	encoded := flag.Bool("encoded", false, "also measure kloop's encoded cache (RESULT crcache-encoded-*)")
	child := flag.String("child", "", "internal: run one side in this process and report")
	kubeconfig := flag.String("child-kubeconfig", "", "internal: the child's kubeconfig")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *child != "" {
		if err := runChild(*child, *kubeconfig, *configMaps); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	if *encoded {
		sides = append(sides, "kloop-encoded")
	}
	if err := run(*configMaps, *pods, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "crcache benchmark:", err)
		os.Exit(1)
	}
}

func run(nCM, nPods, rounds int) error {
	ctx := context.Background()
	env, err := testenv.Start(ctx, testenv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("crcache benchmark: %d ConfigMaps, %d Pods, %d rounds, GOMAXPROCS=%d\n", nCM, nPods, rounds, runtime.GOMAXPROCS(0))
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// No service-account controller runs: admission wants the default
	// service account to exist before Pods can be made.
	if _, err := kc.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	began := time.Now()
	if err := seed(ctx, kc, nCM, nPods); err != nil {
		return err
	}
	fmt.Printf("  seeded in %.1fs\n", time.Since(began).Seconds())

	results := map[string][]report{}
	for r := range rounds {
		for i := range sides {
			side := sides[(i+r)%len(sides)]
			rep, err := measure(side, env.KubeconfigPath, nCM)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, side, err)
			}
			fmt.Printf("  round %d %-18s peak RSS %7.1f MiB  retained %7.1f MiB  sync %6.2fs  reconcile %6.2fs\n",
				r+1, side, mib(rep.PeakRSS), mib(rep.Retained), time.Duration(rep.Sync).Seconds(), time.Duration(rep.Reconcile).Seconds())
			results[side] = append(results[side], rep)
		}
	}
	for _, kside := range []string{"kloop", "kloop-encoded"} {
		if results[kside] == nil {
			continue
		}
		prefix := "crcache-"
		if kside == "kloop-encoded" {
			prefix = "crcache-encoded-"
		}
		line := func(name, unit string, f func(report) float64) {
			k, p := median(results[kside], f), median(results["controller-runtime"], f)
			fmt.Printf("RESULT %s%s kloop=%.3f peer=%.3f ratio=%.2f unit=%s peer_name=controller-runtime\n", prefix, name, k, p, k/p, unit)
		}
		line("peak-rss-bytes", "B", func(r report) float64 { return float64(r.PeakRSS) })
		line("retained-bytes", "B", func(r report) float64 { return float64(r.Retained) })
		line("sync-seconds", "s", func(r report) float64 { return time.Duration(r.Sync).Seconds() })
		line("reconcile-seconds", "s", func(r report) float64 { return time.Duration(r.Reconcile).Seconds() })
		line("get-configmap-ns", "ns", func(r report) float64 { return float64(r.GetConfigMap) })
		line("get-pod-ns", "ns", func(r report) float64 { return float64(r.GetPod) })
	}
	for _, side := range sides {
		r := results[side]
		fmt.Printf("  %-18s Get (deep copy / UnsafeDisableDeepCopy): ConfigMap %s / %s ns, Pod %s / %s ns\n", side,
			fmtMedian(r, func(r report) float64 { return float64(r.GetConfigMap) }), fmtMedian(r, func(r report) float64 { return float64(r.GetConfigMapNoCopy) }),
			fmtMedian(r, func(r report) float64 { return float64(r.GetPod) }), fmtMedian(r, func(r report) float64 { return float64(r.GetPodNoCopy) }))
	}
	return nil
}

func measure(side, kubeconfig string, nCM int) (report, error) {
	c, err := childproc.Start("-child", side, "-child-kubeconfig", kubeconfig, "-configmaps", strconv.Itoa(nCM))
	if err != nil {
		return report{}, err
	}
	defer c.Close()
	line, err := c.Expect("REPORT")
	if err != nil {
		return report{}, err
	}
	var rep report
	return rep, json.Unmarshal([]byte(line), &rep)
}

// seed makes nCM ConfigMaps and nPods Pods, Pod i owned by ConfigMap i.
func seed(ctx context.Context, kc kubernetes.Interface, nCM, nPods int) error {
	const writers = 32
	uids := make([]types.UID, nCM)
	var failed atomic.Pointer[error]
	do := func(n int, one func(i int) error) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < n && failed.Load() == nil; i += writers {
					if err := one(i); err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				}
			})
		}
		wg.Wait()
	}
	do(nCM, func(i int) error {
		b := make([]byte, 256)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		cm, err := kc.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: cmName(i), Namespace: namespace, Labels: map[string]string{"app": "bench", "shard": "s" + strconv.Itoa(i%16)}},
			Data:       map[string]string{"payload": hex.EncodeToString(b)},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		uids[i] = cm.UID
		return nil
	})
	if p := failed.Load(); p != nil {
		return *p
	}
	do(nPods, func(i int) error {
		_, err := kc.CoreV1().Pods(namespace).Create(ctx, pod(i, uids[i%nCM]), metav1.CreateOptions{})
		return err
	})
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

func cmName(i int) string  { return fmt.Sprintf("cm-%06d", i) }
func podName(i int) string { return fmt.Sprintf("pod-%06d", i) }

// pod is a Pod of a typical service's shape (labels, annotations, two
// containers with env, ports, probes, resources and mounts, volumes),
// owned by the ConfigMap of uid.
func pod(i int, owner types.UID) *corev1.Pod {
	app := "svc-" + strconv.Itoa(i%16)
	yes := true
	env := make([]corev1.EnvVar, 0, 11)
	for k := range 10 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", k), Value: fmt.Sprintf("value-%d-%s", k, app)})
	}
	env = append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(i),
			Namespace: namespace,
			Labels:    map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "bench"},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cmName(i), UID: owner, Controller: &yes}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/team/" + app + ":v1.42.0",
				Args:  []string{"--config=/etc/app/config.yaml", "--log-level=info"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				Env:   env, Resources: res, LivenessProbe: probe, ReadinessProbe: probe,
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "data", MountPath: "/data"}},
			}, {
				Name: "proxy", Image: "registry.example.com/mesh/proxy:v2.3.1",
				Args:      []string{"--upstream=127.0.0.1:8080"},
				Ports:     []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}},
				Resources: res,
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// reconciler reads the ConfigMap and its Pod through the manager's client
// (from the cache) and counts the ConfigMaps it has seen.
type reconciler struct {
	client.Client
	mu   sync.Mutex
	seen map[string]bool
	want int
	done chan struct{}
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var i int
	if _, err := fmt.Sscanf(cm.Name, "cm-%06d", &i); err == nil {
		var p corev1.Pod
		if err := r.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: podName(i)}, &p); err != nil && client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen[req.Name] {
		r.seen[req.Name] = true
		if len(r.seen) == r.want {
			close(r.done)
		}
	}
	return reconcile.Result{}, nil
}

// runChild runs one side: a manager with one controller, until every
// ConfigMap has been reconciled; then it measures and prints one line
// "REPORT <json>", and waits for its stdin to close.
func runChild(side, kubeconfig string, nCM int) error {
	crlog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	opts := ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	}
	switch side {
	case "kloop":
		opts.NewCache = crcache.NewCache
	case "kloop-encoded":
		opts.NewCache = crcache.NewCacheWith(crcache.Options{Memory: informer.Memory{Encoded: true}})
	case "controller-runtime":
	default:
		return fmt.Errorf("unknown side %q", side)
	}
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc

	began := time.Now()
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	r := &reconciler{Client: mgr.GetClient(), seen: map[string]bool{}, want: nCM, done: make(chan struct{})}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&corev1.Pod{}).
		Named("bench").Complete(r); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	// The controller asks for its informers once the manager runs: wait
	// for the cache to start, then for both informers to sync.
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("cache did not start")
	}
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Pod{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("%T informer: %w", obj, err)
		}
	}
	synced := time.Now()
	select {
	case <-r.done:
	case err := <-errc:
		return fmt.Errorf("manager stopped: %v", err)
	case <-time.After(30 * time.Minute):
		return errors.New("not every ConfigMap reconciled within 30 minutes")
	}
	rep := report{Sync: int64(synced.Sub(began)), Reconcile: int64(time.Since(synced)), PeakRSS: vmHWM()}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	rep.Retained = int64(ms.HeapAlloc) - int64(before)
	if err := timeGets(ctx, mgr.GetCache(), nCM, &rep); err != nil {
		return err
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Printf("REPORT %s\n", b)
	_, _ = os.Stdin.Read(make([]byte, 1)) // the parent closes stdin when done
	cancel()
	return <-errc
}

// timeGets measures the mean time of a Get through the cache, of
// ConfigMaps and of Pods, with and without the deep copy.
func timeGets(ctx context.Context, c cache.Cache, nCM int, rep *report) error {
	const n = 20000
	yes := true
	noCopy := &client.GetOptions{UnsafeDisableDeepCopy: &yes}
	measure := func(obj client.Object, name func(i int) string, count int, opts ...client.GetOption) (int64, error) {
		began := time.Now()
		for i := range n {
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name(i % count)}, obj, opts...); err != nil {
				return 0, err
			}
		}
		return int64(time.Since(began)) / n, nil
	}
	var err error
	if rep.GetConfigMap, err = measure(&corev1.ConfigMap{}, cmName, nCM); err != nil {
		return err
	}
	if rep.GetConfigMapNoCopy, err = measure(&corev1.ConfigMap{}, cmName, nCM, noCopy); err != nil {
		return err
	}
	var all corev1.PodList
	if err := c.List(ctx, &all, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	pods := len(all.Items)
	if pods == 0 {
		return errors.New("no pod to read")
	}
	if rep.GetPod, err = measure(&corev1.Pod{}, podName, pods); err != nil {
		return err
	}
	rep.GetPodNoCopy, err = measure(&corev1.Pod{}, podName, pods, noCopy)
	return err
}

// vmHWM is the process's RSS high-water mark, in bytes.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}

func fmtMedian(rs []report, f func(report) float64) string {
	return strconv.FormatFloat(median(rs, f), 'f', 0, 64)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func median(rs []report, f func(report) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)/2]
}
