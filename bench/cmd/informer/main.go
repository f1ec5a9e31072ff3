// Command informer compares kloop's informer with client-go's
// SharedIndexInformer on the same data, in one process, against a real API
// server that it starts itself (package testenv):
//
//	N ConfigMaps (default 20,000) in one namespace, each with a 512-byte
//	payload and 2 labels, created by 8 concurrent writers before anything
//	is measured.
//
// Each side is used with its default configuration: kloop's
// informer.Of[*corev1.ConfigMap] (protobuf, streaming list, managedFields
// stripped, repeated metadata shared between objects, the built-in
// namespace grouping) and client-go's SharedInformerFactory ConfigMap
// informer (protobuf, streaming list, namespace indexer). Both register one
// no-op handler. The labels are app=bench on every object and shard=s0…s15,
// so there are 16 distinct label sets, which kloop stores once each;
// -kloop-no-sharing shows the figure without that.
//
//   - informer-sync-seconds: from starting the informer to its synced
//     channel (kloop Informer.Synced, client-go HasSyncedChecker().Done()).
//   - informer-bytes-per-object: Go heap retained per object once synced:
//     HeapAlloc after two forced GCs with the informer running, minus
//     HeapAlloc after two forced GCs before it started, divided by N.
//   - informer-metadata-bytes-per-object: the same for kloop's metadata-only
//     informer (informer.OfResource[*metav1.PartialObjectMetadata]), against client-go's default full
//     informer: what a controller that needs only names, labels and owners
//     pays with each.
//   - informer-transform-bytes-per-object: the same for kloop's informer
//     with a transform (Informer.SetTransform) that keeps what a controller
//     reading names, labels and the keys of Data needs: the Data values go.
//   - informer-encoded-bytes-per-object: the same for kloop's informer
//     with the encoded cache (informer.Memory.Encoded), and
//     informer-encoded-get-ns / informer-encoded-list-ms its reads against
//     the default (decoded) cache's: a Get of a random object, a List of
//     all. The CPU time of the Gets is printed too (a comment): steadier
//     than their wall time on a loaded machine.
//   - informer-sync-vs-wire: kloop's sync against the bare initial stream,
//     the "wire" side: the same streaming list kloop's reflector opens
//     (sendInitialEvents, resourceVersionMatch=NotOlderThan, bookmarks)
//     through client-go's protobuf typed client, every object decoded and
//     dropped, timed from the request to the initial-events-end bookmark.
//     It is what the API server, the network and decoding take; everything
//     above it is the informer's own cost. The "wire-kloop" side is the
//     same through kloop's decoding path (printed as a comment).
//   - informer-event-latency-p99: both informers run at once and see the
//     same writes; a write is a merge patch of one annotation (a sequence
//     number) on a distinct ConfigMap, and its latency runs from just before
//     the PATCH is sent to the handler's OnUpdate for that sequence number.
//
// Sync and memory are measured in rounds; each round runs every side (kloop,
// client-go, kloop-metadata, kloop-transform, wire, wire-kloop; -sides
// chooses) one after the other, one at a time, in a rotating order, each
// starting from a fresh informer after the previous one was stopped and
// collected. RESULT lines give each side's median. After its memory is
// measured, each full informer's reads are timed (a Get of a random cached
// object, a List of all; printed as comments).
//
// The cost curve: -n with a list of sizes (1000,10000,100000) seeds up to
// each size in turn and measures every side there; each RESULT name then
// ends in -n<size>. The latency figure is taken once, at the largest size
// (-updates 0 skips it).
//
// Above 20,000 ConfigMaps the default is the peak measurement alone (see
// peak.go): no in-process side (-sides all runs them) and no latency
// figure (-updates 3000 takes it).
//
// Run with: cd bench && go run ./cmd/informer -n 20000
// or, for the peak at 100,000: cd bench && go run ./cmd/informer -n 100000
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	cgcache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/watcher"
)

const (
	namespace   = "bench"
	seqKey      = "bench-seq"
	seedWriters = 8
)

func main() {
	n := flag.String("n", "20000", "ConfigMaps to seed; a comma-separated list (1000,10000,100000) measures at each size in turn, seeding up to it, for the cost curve")
	rounds := flag.Int("rounds", 3, "sync/memory rounds (each measures every side once)")
	updates := flag.Int("updates", -1, "writes timed for the latency figure (default 3000 up to 20,000 ConfigMaps, 0 above)")
	flag.BoolVar(&noSharing, "kloop-no-sharing", false, "turn off kloop's sharing of repeated metadata (informer.Memory.Unshared), to see what it saves")
	flag.Var(&kloopList, "kloop-initial-list", "kloop's initial list mode: auto (the default), streaming or paginated")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "profiling aid: write a CPU profile of each side's sync to this path with the side's name appended")
	flag.StringVar(&memProfile, "memprofile", "", "profiling aid: write a heap profile of each side, taken when its memory is measured, to this path with the side's name appended")
	flag.StringVar(&traceOut, "trace", "", "profiling aid: write an execution trace of each side's sync to this path with the side's name appended")
	only := flag.String("sides", "", "comma-separated sides to run in this process (default all up to 20,000 ConfigMaps, none above; all for all; none for none): "+strings.Join(sideNames(), ","))
	flag.StringVar(&peakOnly, "peak-sides", "", "comma-separated sides whose peak memory is measured, each in a child process (default all; none for none): "+strings.Join(peakSides, ","))
	flag.IntVar(&peakRounds, "peak-rounds", 3, "rounds of the peak measurement (each runs every peak side once)")
	flag.StringVar(&workload, "workload", "configmaps", "what is seeded and informed: configmaps (512-byte payload) or pods (Pod-shaped objects: about 3 KiB as stored, 11 KiB decoded; peak sides only)")
	flag.BoolVar(&hold, "hold", false, "development aid: after seeding the last size, print the kubeconfig and keep the control plane running until interrupted (run sides by hand with -child SIDE -kubeconfig PATH -n N)")
	child := flag.String("child", "", "internal: run one peak side in this process and report")
	kubeconfig := flag.String("kubeconfig", "", "internal: the child's kubeconfig")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *child != "" {
		n, err := strconv.Atoi(*n)
		if err == nil {
			err = runPeakChild(*child, *kubeconfig, workload, n, memProfile)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	if workload != "configmaps" && workload != "pods" {
		fmt.Fprintf(os.Stderr, "informer benchmark: -workload %q: want configmaps or pods\n", workload)
		os.Exit(2)
	}
	sizes, err := parseSizes(*n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "informer benchmark:", err)
		os.Exit(2)
	}
	if *updates < 0 {
		*updates = 3000
		if sizes[len(sizes)-1] > inProcessUpTo {
			*updates = 0
		}
	}
	if err := run(sizes, *rounds, *updates, *only); err != nil {
		fmt.Fprintln(os.Stderr, "informer benchmark:", err)
		os.Exit(1)
	}
}

func run(sizes []int, rounds, updates int, only string) error {
	ctx := context.Background()
	began := time.Now()
	sides, err := selectSides(only)
	if err != nil {
		return err
	}
	psides, err := selectPeakSides(peakOnly)
	if err != nil {
		return err
	}
	if workload == "pods" {
		sides, updates = nil, 0 // the in-process sides are ConfigMap informers
	}
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
	what := "ConfigMaps (512-byte payload, 2 labels)"
	if workload == "pods" {
		what = "Pods (about 3 KiB as stored, 11 KiB decoded)"
	}
	fmt.Printf("informer benchmark: N=%s %s, %d rounds, %d peak rounds, %d timed writes, GOMAXPROCS=%d\n",
		strings.Join(sizeNames(sizes), ","), what, rounds, peakRounds, updates, runtime.GOMAXPROCS(0))
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if workload == "pods" {
		// No service-account controller runs: admission wants the
		// namespace's default service account to exist.
		if _, err := kc.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	seededTo := 0
	for _, n := range sizes {
		seeded := time.Now()
		if err := seed(ctx, kc, seededTo, n); err != nil {
			return err
		}
		fmt.Printf("  seeded %d %s (%d in all) in %.1fs\n", n-seededTo, workload, n, time.Since(seeded).Seconds())
		seededTo = n
		if hold && n == sizes[len(sizes)-1] {
			fmt.Printf("holding: -kubeconfig %s\n", env.KubeconfigPath)
			sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			<-sig.Done()
			stop()
			return nil
		}
		// One size keeps the figures' plain names; a curve suffixes each
		// with its size.
		suffix := ""
		if len(sizes) > 1 {
			suffix = "-n" + strconv.Itoa(n)
		}
		if len(psides) > 0 {
			if err := measurePeaks(env.KubeconfigPath, workload, psides, n, peakRounds, suffix); err != nil {
				return err
			}
		}
		sides := sides
		if only == "" && n > inProcessUpTo {
			sides = nil
		}
		if len(sides) == 0 {
			continue
		}

		results := map[string][]measurement{}
		for r := range rounds {
			for i := range sides {
				s := sides[(i+r)%len(sides)]
				m, err := measure(ctx, cfg, s, n)
				if err != nil {
					return fmt.Errorf("N=%d round %d, %s: %w", n, r+1, s.name, err)
				}
				if s.wire {
					fmt.Printf("  N=%-6d round %d %-15s sync %6.3fs\n", n, r+1, s.name, m.sync.Seconds())
				} else {
					fmt.Printf("  N=%-6d round %d %-15s sync %6.3fs  retained heap %7.1f MiB  %6.0f B/object\n",
						n, r+1, s.name, m.sync.Seconds(), float64(m.heap)/(1<<20), m.bytesPerObject(n))
				}
				results[s.name] = append(results[s.name], m)
			}
		}
		syncOf := func(side string) float64 {
			return median(results[side], func(m measurement) float64 { return m.sync.Seconds() })
		}
		bytesOf := func(side string) float64 {
			return median(results[side], func(m measurement) float64 { return m.bytesPerObject(n) })
		}
		have := func(names ...string) bool {
			for _, name := range names {
				if len(results[name]) == 0 {
					return false
				}
			}
			return true
		}
		if have("kloop", "client-go") {
			k, p := syncOf("kloop"), syncOf("client-go")
			fmt.Printf("RESULT informer-sync-seconds%s kloop=%.3f peer=%.3f ratio=%.2f unit=s peer_name=client-go\n", suffix, k, p, k/p)
		}
		if have("kloop", "wire") {
			k, w := syncOf("kloop"), syncOf("wire")
			fmt.Printf("RESULT informer-sync-vs-wire%s kloop=%.3f peer=%.3f ratio=%.2f unit=s peer_name=wire\n", suffix, k, w, k/w)
		}
		if have("client-go", "wire") {
			p, w := syncOf("client-go"), syncOf("wire")
			fmt.Printf("# client-go's sync against the bare stream: %.3fs / %.3fs = %.2f\n", p, w, p/w)
		}
		if have("wire-kloop") {
			fmt.Printf("# bare stream through kloop's decoder: %.3fs\n", syncOf("wire-kloop"))
		}
		// CPU time is steadier than wall time on a loaded machine: what this
		// process (not the API server) spent on each side's sync.
		var cpus []string
		for _, name := range sideNames() {
			if have(name) {
				ms := median(results[name], func(m measurement) float64 { return float64(m.cpu) / 1e6 })
				cpus = append(cpus, fmt.Sprintf("%s=%.0f", name, ms))
			}
		}
		fmt.Printf("# CPU time during sync (this process, ms, median): %s\n", strings.Join(cpus, " "))
		if have("kloop", "client-go") {
			k, p := bytesOf("kloop"), bytesOf("client-go")
			fmt.Printf("RESULT informer-bytes-per-object%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=client-go\n", suffix, k, p, k/p)
		}
		if have("kloop-metadata", "client-go") {
			k, p := bytesOf("kloop-metadata"), bytesOf("client-go")
			fmt.Printf("RESULT informer-metadata-bytes-per-object%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=client-go\n", suffix, k, p, k/p)
			fmt.Printf("# kloop-metadata sync %.3fs\n", syncOf("kloop-metadata"))
		}
		if have("kloop-transform", "client-go") {
			k, p := bytesOf("kloop-transform"), bytesOf("client-go")
			fmt.Printf("RESULT informer-transform-bytes-per-object%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=client-go\n", suffix, k, p, k/p)
			fmt.Printf("# kloop-transform sync %.3fs\n", syncOf("kloop-transform"))
		}
		if have("kloop-encoded", "client-go") {
			k, p := bytesOf("kloop-encoded"), bytesOf("client-go")
			fmt.Printf("RESULT informer-encoded-bytes-per-object%s kloop=%.0f peer=%.0f ratio=%.3f unit=B peer_name=client-go\n", suffix, k, p, k/p)
			fmt.Printf("# kloop-encoded sync %.3fs\n", syncOf("kloop-encoded"))
		}
		readsOf := func(side string, f func(measurement) time.Duration) float64 {
			return median(results[side], func(m measurement) float64 { return float64(f(m)) })
		}
		get := func(m measurement) time.Duration { return m.get }
		getCPU := func(m measurement) time.Duration { return m.getCPU }
		list := func(m measurement) time.Duration { return m.list }
		if have("kloop-encoded", "kloop") {
			k, p := readsOf("kloop-encoded", get), readsOf("kloop", get)
			fmt.Printf("RESULT informer-encoded-get-ns%s kloop=%.0f peer=%.0f ratio=%.1f unit=ns peer_name=kloop-decoded\n", suffix, k, p, k/p)
			k, p = readsOf("kloop-encoded", list), readsOf("kloop", list)
			fmt.Printf("RESULT informer-encoded-list-ms%s kloop=%.2f peer=%.2f ratio=%.1f unit=ms peer_name=kloop-decoded\n", suffix, k/1e6, p/1e6, k/p)
		}
		for _, name := range []string{"kloop", "kloop-encoded", "kloop-transform", "client-go"} {
			if have(name) {
				fmt.Printf("# %s reads: Get %.0f ns (CPU %.0f ns), List of %d %.2f ms\n", name, readsOf(name, get), readsOf(name, getCPU), n, readsOf(name, list)/1e6)
			}
		}
	}

	if updates > 0 {
		n := sizes[len(sizes)-1]
		latK, latP, err := latency(ctx, cfg, kc, n, updates)
		if err != nil {
			return err
		}
		p := func(v []time.Duration, q float64) float64 {
			return float64(v[min(len(v)-1, int(q*float64(len(v))))]) / 1e6
		}
		fmt.Printf("  latency over %d writes (N=%d): kloop p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms; client-go p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms\n",
			len(latK), n, p(latK, .5), p(latK, .9), p(latK, .99), p(latK, 1), p(latP, .5), p(latP, .9), p(latP, .99), p(latP, 1))
		fmt.Printf("RESULT informer-event-latency-p99 kloop=%.2f peer=%.2f ratio=%.2f unit=ms peer_name=client-go\n", p(latK, .99), p(latP, .99), p(latK, .99)/p(latP, .99))
	}
	fmt.Printf("# medians of %d rounds; whole run %.0fs\n", rounds, time.Since(began).Seconds())
	return nil
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-n: %q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

func sizeNames(sizes []int) []string {
	out := make([]string, len(sizes))
	for i, n := range sizes {
		out[i] = strconv.Itoa(n)
	}
	return out
}

// seed creates ConfigMaps from to n-1 with a few concurrent writers.
func seed(ctx context.Context, kc kubernetes.Interface, from, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, seedWriters)
	for w := range seedWriters {
		wg.Go(func() {
			buf := make([]byte, 256)
			for i := from + w; i < n; i += seedWriters {
				if _, err := rand.Read(buf); err != nil {
					errs <- err
					return
				}
				if workload == "pods" {
					p := benchPod(i, hex.EncodeToString(buf[:8]))
					if _, err := kc.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						errs <- fmt.Errorf("create %s: %w", p.Name, err)
						return
					}
					continue
				}
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{
						Name:      fmt.Sprintf("cm-%06d", i),
						Namespace: namespace,
						Labels:    map[string]string{"app": "bench", "shard": "s" + strconv.Itoa(i%16)},
					},
					Data: map[string]string{"payload": hex.EncodeToString(buf)}, // 512 bytes
				}
				if _, err := kc.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", cm.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// benchPod is the Pod-shaped object: what a Deployment's pod of a
// typical service looks like before a scheduler sees it (an owner, the
// usual labels and annotations, two containers with env, ports, probes,
// resources and mounts, volumes); about 3 KiB as stored, managedFields
// and the service-account volume admission adds included.
func benchPod(i int, hash string) *corev1.Pod {
	app := "svc-" + strconv.Itoa(i%16)
	ctrl := true
	env := make([]corev1.EnvVar, 0, 12)
	for k := range 10 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", k), Value: fmt.Sprintf("value-%d-%s", k, app)})
	}
	env = append(env,
		corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%s-%06d", app, hash[:6], i),
			Namespace: namespace,
			Labels:    map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "bench", "pod-template-hash": "5d4f8c7b9" + strconv.Itoa(i%16)},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-5d4f8c7b9", UID: types.UID(fmt.Sprintf("6f1c2d3e-0000-4000-8000-%012d", i%16)), Controller: &ctrl}},
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
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Tolerations:  []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

// side starts one informer with one no-op handler. It returns the
// informer's synced channel, the channel that closes once the handler has
// been given the initial list, something to keep alive while memory is
// measured, and a function that stops the informer and waits for it.
//
// A wire side is no informer: it reads the bare initial stream, objects
// decoded and dropped; both its channels close at the stream's end and it
// retains nothing.
type side struct {
	name  string
	wire  bool
	start func(cfg *rest.Config, n int) (*running, error)
}

// running is a started side.
type running struct {
	synced, handled <-chan struct{}
	live            any          // kept alive while memory is measured
	stop            func() error // stops the side and waits for it
	// get reads one cached object, list all of them: set for sides whose
	// reads are timed.
	get  func(name string) bool
	list func() int
}

// allSides are the sides of a run, in the order of its first round.
var allSides = []side{
	{name: "kloop", start: runKloop},
	{name: "client-go", start: runClientGo},
	{name: "kloop-metadata", start: runKloopMetadata},
	{name: "kloop-transform", start: runKloopTransform},
	{name: "kloop-encoded", start: runKloopEncoded},
	{name: "wire", wire: true, start: runWire},
	{name: "wire-kloop", wire: true, start: runWireKloop},
}

func sideNames() []string {
	out := make([]string, len(allSides))
	for i, s := range allSides {
		out[i] = s.name
	}
	return out
}

// inProcessUpTo is the largest size at which the in-process sides and
// the latency figure run unless asked for: above it a run's default is the
// peak measurement alone (at 100,000 the in-process sides take most of an
// hour on 2 cores).
const inProcessUpTo = 20000

func selectSides(only string) ([]side, error) {
	if only == "" || only == "all" {
		return allSides, nil
	}
	if only == "none" {
		return nil, nil
	}
	var out []side
	for name := range strings.SplitSeq(only, ",") {
		i := slices.IndexFunc(allSides, func(s side) bool { return s.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-sides: unknown side %q (have %s)", name, strings.Join(sideNames(), ","))
		}
		out = append(out, allSides[i])
	}
	return out, nil
}

type measurement struct {
	sync time.Duration
	cpu  time.Duration // CPU time of this process, user and system, during the sync
	heap int64
	// Reads, for sides that time them: a Get of one object and a List of
	// all of them.
	get, list time.Duration
	getCPU    time.Duration // CPU time of this process per Get
}

func (m measurement) bytesPerObject(n int) float64 { return float64(m.heap) / float64(n) }

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

var (
	cpuProfile, memProfile, traceOut string
	noSharing                        bool
	peakOnly, workload               string
	peakRounds                       int
	hold                             bool
)

func selectPeakSides(only string) ([]string, error) {
	switch only {
	case "", "all":
		return peakSides, nil
	case "none":
		return nil, nil
	}
	var out []string
	for name := range strings.SplitSeq(only, ",") {
		if !slices.Contains(peakSides, name) {
			return nil, fmt.Errorf("-peak-sides: unknown side %q (have %s)", name, strings.Join(peakSides, ","))
		}
		out = append(out, name)
	}
	return out, nil
}

// kloopList lets a run try kloop's other initial-list modes.
var kloopList listMode

type listMode watcher.InitialListMode

func (m *listMode) String() string { return watcher.InitialListMode(*m).String() }

func (m *listMode) Set(s string) error {
	for _, v := range []watcher.InitialListMode{watcher.InitialListAuto, watcher.InitialListStreaming, watcher.InitialListPaginated} {
		if strings.EqualFold(v.String(), s) {
			*m = listMode(v)
			return nil
		}
	}
	return fmt.Errorf("unknown mode %q", s)
}

func kloopOptions() informer.FactoryOptions {
	return informer.FactoryOptions{
		Registerer: prometheus.NewRegistry(),
		Watch:      watcher.Options{InitialList: watcher.InitialListMode(kloopList)},
		Memory:     informer.Memory{Unshared: noSharing},
	}
}

func measure(ctx context.Context, cfg *rest.Config, s side, n int) (measurement, error) {
	before := heapAlloc()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile + "." + s.name)
		if err != nil {
			return measurement{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return measurement{}, err
		}
	}
	if traceOut != "" {
		f, err := os.Create(traceOut + "." + s.name)
		if err != nil {
			return measurement{}, err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return measurement{}, err
		}
	}
	began, cpu0 := time.Now(), cpuTime()
	r, err := s.start(cfg, n)
	if err != nil {
		return measurement{}, err
	}
	select {
	case <-r.synced:
	case <-time.After(5 * time.Minute):
		_ = r.stop()
		return measurement{}, fmt.Errorf("not synced after 5 minutes")
	}
	took, cpu := time.Since(began), cpuTime()-cpu0
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if traceOut != "" {
		trace.Stop()
	}
	// Memory is what stays once the handler, too, has been through the
	// initial list: a queue still draining is not retained memory.
	select {
	case <-r.handled:
	case <-time.After(5 * time.Minute):
		_ = r.stop()
		return measurement{}, fmt.Errorf("handler not synced after 5 minutes")
	}
	after := heapAlloc()
	if memProfile != "" && !s.wire {
		f, err := os.Create(memProfile + "." + s.name)
		if err != nil {
			return measurement{}, err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return measurement{}, err
		}
	}
	runtime.KeepAlive(r.live)
	m := measurement{sync: took, cpu: cpu, heap: int64(after) - int64(before)}
	if r.get != nil {
		m.get, m.getCPU, m.list, err = timeReadsOf(r, n)
	}
	if serr := r.stop(); err == nil {
		err = serr
	}
	return m, err
}

// timeReads times Gets of objects picked at random, and Lists of all
// objects, after the memory was measured; each figure is the median of a
// few batches.
func timeReadsOf(r *running, n int) (get, getCPU, list time.Duration, err error) {
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("cm-%06d", i)
	}
	return timeReads(r.get, r.list, all, n)
}

// timeReads times gets of 4,096 names picked (with a fixed seed) from
// all, 50,000 a batch, and lists, which must each return n objects: the
// medians of 5 batches (per get) and of 3 lists.
func timeReads(get func(string) bool, listAll func() int, all []string, n int) (perGet, getCPU, list time.Duration, err error) {
	if len(all) == 0 {
		return 0, 0, 0, errors.New("reads: no names cached")
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	names := make([]string, 4096)
	for i := range names {
		names[i] = all[rng.IntN(len(all))]
	}
	const batch = 50000
	var gets, cpus, lists []time.Duration
	for range 5 {
		began, cpu0 := time.Now(), cpuTime()
		for i := range batch {
			if !get(names[i%len(names)]) {
				return 0, 0, 0, fmt.Errorf("get %s: not cached", names[i%len(names)])
			}
		}
		gets = append(gets, time.Since(began)/batch)
		cpus = append(cpus, (cpuTime()-cpu0)/batch)
	}
	for range 3 {
		began := time.Now()
		if got := listAll(); got != n {
			return 0, 0, 0, fmt.Errorf("list: %d objects, want %d", got, n)
		}
		lists = append(lists, time.Since(began))
	}
	slices.Sort(gets)
	slices.Sort(cpus)
	slices.Sort(lists)
	return gets[len(gets)/2], cpus[len(cpus)/2], lists[len(lists)/2], nil
}

func runKloop(cfg *rest.Config, _ int) (*running, error) {
	return runKloopWith(cfg, kloopOptions(), nil)
}

// runKloopTransform is kloop's default informer with a transform that
// keeps what a controller reading names, labels and the keys of its
// ConfigMaps' data needs: the data values go.
func runKloopTransform(cfg *rest.Config, _ int) (*running, error) {
	return runKloopWith(cfg, kloopOptions(), func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		for k := range cm.Data {
			cm.Data[k] = ""
		}
		return cm
	})
}

// runKloopEncoded is kloop's informer with the encoded cache
// (informer.Memory.Encoded).
func runKloopEncoded(cfg *rest.Config, _ int) (*running, error) {
	opts := kloopOptions()
	opts.Memory.Encoded = true
	return runKloopWith(cfg, opts, nil)
}

func runKloopWith(cfg *rest.Config, opts informer.FactoryOptions, transform func(*corev1.ConfigMap) *corev1.ConfigMap) (*running, error) {
	f := informer.NewFactory(cfg, opts)
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	if transform != nil {
		if err := inf.SetTransform(transform); err != nil {
			return nil, err
		}
	}
	reg, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{}, informer.HandlerOptions{})
	if err != nil {
		return nil, err
	}
	lister := inf.Lister()
	return &running{
		synced: inf.Synced(), handled: reg.Synced(), live: inf, stop: startFactory(f),
		get: func(name string) bool {
			_, ok := lister.Get(namespace, name)
			return ok
		},
		list: func() int { return len(lister.ListInNamespace(namespace, nil)) },
	}, nil
}

func runKloopMetadata(cfg *rest.Config, _ int) (*running, error) {
	f := informer.NewFactory(cfg, kloopOptions())
	inf, err := informer.OfResource[*metav1.PartialObjectMetadata](f, corev1.SchemeGroupVersion.WithResource("configmaps"), informer.Scope{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	reg, err := inf.AddHandler(informer.HandlerFuncs[*metav1.PartialObjectMetadata]{}, informer.HandlerOptions{})
	if err != nil {
		return nil, err
	}
	return &running{synced: inf.Synced(), handled: reg.Synced(), live: inf, stop: startFactory(f)}, nil
}

func startFactory(f *informer.Factory) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	return func() error {
		cancel()
		if err := <-done; err != nil {
			return fmt.Errorf("kloop factory: %w", err)
		}
		return nil
	}
}

// wireOptions are the options of the streaming list kloop's reflector
// opens first (see watcher's machine): the latest state, every object as
// an ADDED event, then the initial-events-end bookmark.
func wireOptions() metav1.ListOptions {
	sendInitial := true
	timeout := int64(600)
	return metav1.ListOptions{
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    &sendInitial,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       &timeout,
	}
}

// runWire is the bare initial stream through client-go's typed client
// (protobuf, as its informer uses): what the wire and decoding alone take.
func runWire(cfg *rest.Config, n int) (*running, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return stream(n, func(ctx context.Context) (apiwatch.Interface, error) {
		return kc.CoreV1().ConfigMaps(namespace).Watch(ctx, wireOptions())
	})
}

// runWireKloop is the bare initial stream through kloop's own decoding
// path (watcher.FromResource with protobuf, managedFields skipped, label
// sets shared, as informer.OfResource asks for), for comparison.
func runWireKloop(cfg *rest.Config, n int) (*running, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = kruntime.ContentTypeProtobuf
	c.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	opts := watcher.Scope{Namespace: namespace, Decoding: watcher.Decoding{DropManagedFields: true, ShareLabels: true}}
	lw, err := watcher.FromResource[*corev1.ConfigMap](c, clientgoscheme.Scheme, corev1.SchemeGroupVersion.WithResource("configmaps"), opts)
	if err != nil {
		return nil, err
	}
	return stream(n, func(ctx context.Context) (apiwatch.Interface, error) { return lw.Watch(ctx, wireOptions()) })
}

// stream opens a streaming list and drops every object until the
// initial-events-end bookmark, when it closes synced; it checks that it
// saw n objects.
func stream(n int, open func(context.Context) (apiwatch.Interface, error)) (*running, error) {
	ctx, cancel := context.WithCancel(context.Background())
	synced := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			w, err := open(ctx)
			if err != nil {
				return err
			}
			defer w.Stop()
			seen := 0
			for ev := range w.ResultChan() {
				switch ev.Type {
				case apiwatch.Added:
					seen++
				case apiwatch.Bookmark:
					m, ok := ev.Object.(metav1.Object)
					if ok && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
						close(synced)
						if seen != n {
							return fmt.Errorf("initial stream had %d objects, want %d", seen, n)
						}
						return nil
					}
				default:
					return fmt.Errorf("unexpected %s event in the initial stream", ev.Type)
				}
			}
			return fmt.Errorf("stream ended after %d objects without the initial-events-end bookmark", seen)
		}()
	}()
	stop := func() error { cancel(); return <-done }
	return &running{synced: synced, handled: synced, stop: stop}, nil
}

func runClientGo(cfg *rest.Config, _ int) (*running, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().ConfigMaps().Informer()
	reg, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.StartWithContext(ctx)
	lister := f.Core().V1().ConfigMaps().Lister().ConfigMaps(namespace)
	return &running{
		synced: inf.HasSyncedChecker().Done(), handled: reg.HasSyncedChecker().Done(), live: inf,
		stop: func() error { cancel(); f.Shutdown(); return nil },
		get: func(name string) bool {
			_, err := lister.Get(name)
			return err == nil
		},
		list: func() int {
			l, _ := lister.List(labels.Everything())
			return len(l)
		},
	}, nil
}

// latency runs both informers at once, makes updates writes (a merge patch
// of one annotation on distinct ConfigMaps, from 4 writers) and returns
// each side's sorted latencies from just before the PATCH to its handler.
func latency(ctx context.Context, cfg *rest.Config, kc kubernetes.Interface, n, updates int) (kloopLat, peerLat []time.Duration, err error) {
	sent := make([]atomic.Int64, updates) // UnixNano just before each PATCH
	type recorder struct {
		mu   sync.Mutex
		lat  []time.Duration
		left atomic.Int64
		all  chan struct{}
	}
	newRec := func() *recorder {
		r := &recorder{all: make(chan struct{})}
		r.left.Store(int64(updates))
		return r
	}
	observe := func(r *recorder, annotations map[string]string) {
		now := time.Now().UnixNano()
		v, ok := annotations[seqKey]
		if !ok {
			return
		}
		i, err := strconv.Atoi(v)
		if err != nil || i >= updates {
			return
		}
		r.mu.Lock()
		r.lat = append(r.lat, time.Duration(now-sent[i].Load()))
		r.mu.Unlock()
		if r.left.Add(-1) == 0 {
			close(r.all)
		}
	}
	kr, pr := newRec(), newRec()

	kf := informer.NewFactory(cfg, kloopOptions())
	kinf, err := informer.Of[*corev1.ConfigMap](kf, informer.Scope{Namespace: namespace})
	if err != nil {
		return nil, nil, err
	}
	kreg, err := kinf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		UpdateFunc: func(_, cm *corev1.ConfigMap) { observe(kr, cm.Annotations) },
	}, informer.HandlerOptions{})
	if err != nil {
		return nil, nil, err
	}
	pf := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(namespace))
	pinf := pf.Core().V1().ConfigMaps().Informer()
	preg, err := pinf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { observe(pr, obj.(*corev1.ConfigMap).Annotations) },
	})
	if err != nil {
		return nil, nil, err
	}
	stopK := startFactory(kf)
	defer stopK()
	pctx, pcancel := context.WithCancel(ctx)
	pf.StartWithContext(pctx)
	defer func() { pcancel(); pf.Shutdown() }()
	// Both handlers have been through the initial list before the first
	// write: a kloop handler still busy with it would get a write to an
	// object whose add it has not yet been given merged into that add, and
	// never see it as an update.
	if err := kreg.WaitForSync(ctx); err != nil {
		return nil, nil, err
	}
	if !cgcache.WaitForCacheSync(ctx.Done(), preg.HasSynced) {
		return nil, nil, errors.New("client-go handler did not sync")
	}

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < updates; i += 4 {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, seqKey, strconv.Itoa(i))
				sent[i].Store(time.Now().UnixNano())
				if _, err := kc.CoreV1().ConfigMaps(namespace).Patch(ctx, fmt.Sprintf("cm-%06d", i%n), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, err
	}
	for name, r := range map[string]*recorder{"kloop": kr, "client-go": pr} {
		select {
		case <-r.all:
		case <-time.After(2 * time.Minute):
			return nil, nil, fmt.Errorf("%s handler saw %d of %d writes", name, updates-int(r.left.Load()), updates)
		}
	}
	slices.Sort(kr.lat)
	slices.Sort(pr.lat)
	return kr.lat, pr.lat, nil
}

func median(ms []measurement, f func(measurement) float64) float64 {
	v := make([]float64, 0, len(ms))
	for _, m := range ms {
		v = append(v, f(m))
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// cpuTime is the CPU time, user and system, this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
