// Command fleet measures what each idle cluster costs a controller program
// that runs over a fleet of clusters, and how long a cluster takes from
// its kubeconfig Secret to its first reconcile, against real control
// planes that it starts itself (package testenv): a home cluster that holds
// the kubeconfig Secrets, and N member clusters (default 8), each with its
// own etcd and kube-apiserver and a few small ConfigMaps in namespace
// "bench".
//
// Both sides watch one small kind, the ConfigMaps of namespace "bench", in
// every member cluster, and reconcile each with a cache read; clusters
// come from kubeconfig Secrets (label kloop.dev/fleet-bench=true) in the
// home cluster:
//
//   - kloop: one App with a fleet (fleet.New, SecretSelector) and one
//     fleet.NewController For the ConfigMaps;
//   - peer: controller-runtime as people run it over many clusters today,
//     one manager per cluster in one process: a manager on the home cluster
//     whose controller watches the Secrets and, for each, starts a manager
//     on that cluster with a ConfigMap controller (the pattern of Cluster
//     API's per-cluster caches; multicluster-runtime is experimental).
//
// Each side runs in a fresh child process (this binary re-executed) per
// cluster count (default 1, 4, 8): the parent creates that many Secrets,
// the child joins the clusters, waits until each has reconciled its
// ConfigMaps and nothing has run for a second, then reports its Go heap in
// use after two forced GCs and its goroutines. A do-nothing child gives the
// baseline the binary carries. Per cluster is the least-squares slope of
// heap (goroutines) over the cluster counts: the cost of one more idle
// cluster, without the program's fixed cost. Then one child per side
// starts with no cluster and adds the members one at a time, each by
// creating its Secret; the figure is the median time from just before the
// Secret's create to the first reconcile in that cluster.
//
// With -profile DIR the kloop child at the largest count writes a heap
// profile and a goroutine dump there.
//
// Run with: cd bench && go run ./cmd/fleet
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/bench/internal/childproc"
	"github.com/kloop-dev/kloop/internal/kubeconfig"
	"github.com/kloop-dev/kloop/testenv"
)

const (
	namespace = "bench"
	label     = "kloop.dev/fleet-bench"
)

func main() {
	child := flag.String("child", "", "run as a child: baseline, kloop, peer, kloop-join or peer-join")
	home := flag.String("home", "", "child: the home cluster's kubeconfig")
	dir := flag.String("dir", "", "child: the members' kubeconfigs (c1.kubeconfig, ...)")
	clusters := flag.Int("clusters", 0, "child: clusters to join")
	objects := flag.Int("objects", 5, "ConfigMaps in each member cluster")
	countsFlag := flag.String("counts", "1,4,8", "cluster counts to measure")
	joins := flag.Int("joins", 0, "clusters joined one at a time for the Secret-to-reconcile time (default: the largest count)")
	profile := flag.String("profile", "", "directory for the kloop child's heap profile and goroutine dump at the largest count")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *child != "" {
		if *profile != "" {
			runtime.MemProfileRate = 1 // every allocation in the heap profile, not a sample
		}
		if err := runChild(*child, *home, *dir, *clusters, *objects, *profile); err != nil {
			fmt.Fprintf(os.Stderr, "fleet benchmark, %s child: %v\n", *child, err)
			os.Exit(1)
		}
		return
	}
	var counts []int
	for f := range strings.SplitSeq(*countsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleet benchmark: -counts %q: want cluster counts of 1 or more, such as 1,4,8\n", *countsFlag)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	slices.Sort(counts)
	if len(counts) < 2 {
		fmt.Fprintln(os.Stderr, "fleet benchmark: -counts needs two counts or more (the per-cluster figure is a slope)")
		os.Exit(2)
	}
	if *joins <= 0 {
		*joins = counts[len(counts)-1]
	}
	if err := run(counts, *joins, *objects, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "fleet benchmark:", err)
		os.Exit(1)
	}
}

// plane is one control plane of the run.
type plane struct {
	env *testenv.Env
	kc  kubernetes.Interface
}

func run(counts []int, joins, objects int, profile string) error {
	ctx := context.Background()
	began := time.Now()
	members := max(counts[len(counts)-1], joins)
	fmt.Printf("fleet benchmark: 1 home + %d member control planes, %d ConfigMaps each in namespace %s, counts %v, %d joins, GOMAXPROCS=%d\n",
		members, objects, namespace, counts, joins, runtime.GOMAXPROCS(0))
	planes, err := startPlanes(ctx, members+1)
	for _, p := range planes {
		if p != nil {
			defer p.env.Stop()
		}
	}
	if err != nil {
		return err
	}
	fmt.Printf("# %d control planes started in %v\n", len(planes), time.Since(began).Round(time.Second))
	dir, err := os.MkdirTemp("", "kloop-bench-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	home := planes[0]
	homeKubeconfig := filepath.Join(dir, "home.kubeconfig")
	if err := kubeconfig.Write(homeKubeconfig, home.env.Config); err != nil {
		return err
	}
	for i, p := range planes[1:] {
		if err := kubeconfig.Write(filepath.Join(dir, memberName(i+1)+".kubeconfig"), p.env.Config); err != nil {
			return err
		}
		for j := range objects {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", j), Namespace: namespace}, Data: map[string]string{"k": "v"}}
			if _, err := p.kc.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	common := []string{"-home", homeKubeconfig, "-dir", dir, "-objects", strconv.Itoa(objects)}

	base, err := measureChild(append([]string{"-child", "baseline"}, common...))
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	fmt.Printf("# baseline (do-nothing child): heap in use %d B, live %d B, %d goroutines\n", base.inuse, base.alloc, base.goroutines)

	sides := []string{"kloop", "peer"}
	got := map[string][]sample{}
	for i, n := range counts {
		if err := setSecrets(ctx, home.kc, dir, n); err != nil {
			return err
		}
		order := sides
		if i%2 == 1 {
			order = []string{"peer", "kloop"}
		}
		for _, side := range order {
			args := append([]string{"-child", side, "-clusters", strconv.Itoa(n)}, common...)
			if side == "kloop" && profile != "" && n == counts[len(counts)-1] {
				args = append(args, "-profile", profile)
			}
			t := time.Now()
			s, err := measureChild(args)
			if err != nil {
				return fmt.Errorf("%s at %d clusters: %w", side, n, err)
			}
			s.n = n
			got[side] = append(got[side], s)
			fmt.Printf("# %s, %d clusters: heap in use %d B above the baseline (%d B a cluster), live %d B above, %d goroutines above (%.1f a cluster), RSS %.1f MiB; joined and idle in %v\n",
				side, n, s.inuse-base.inuse, (s.inuse-base.inuse)/int64(n), s.alloc-base.alloc, s.goroutines-base.goroutines,
				float64(s.goroutines-base.goroutines)/float64(n), float64(s.rss)/(1<<20), time.Since(t).Round(100*time.Millisecond))
		}
	}
	if err := setSecrets(ctx, home.kc, dir, 0); err != nil {
		return err
	}
	slope := func(side string, f func(sample) float64) float64 {
		var xs, ys []float64
		for _, s := range got[side] {
			xs, ys = append(xs, float64(s.n)), append(ys, f(s))
		}
		return leastSquares(xs, ys)
	}
	heapOf := func(s sample) float64 { return float64(s.inuse) }
	liveOf := func(s sample) float64 { return float64(s.alloc) }
	gorOf := func(s sample) float64 { return float64(s.goroutines) }
	kh, ph := slope("kloop", heapOf), slope("peer", heapOf)
	kl, pl := slope("kloop", liveOf), slope("peer", liveOf)
	kg, pg := slope("kloop", gorOf), slope("peer", gorOf)
	fmt.Printf("RESULT fleet-heap-per-cluster-bytes kloop=%.0f peer=%.0f ratio=%.2f unit=bytes peer_name=controller-runtime-per-cluster\n", kh, ph, kh/ph)
	fmt.Printf("RESULT fleet-live-heap-per-cluster-bytes kloop=%.0f peer=%.0f ratio=%.2f unit=bytes peer_name=controller-runtime-per-cluster\n", kl, pl, kl/pl)
	fmt.Printf("RESULT fleet-goroutines-per-cluster kloop=%.1f peer=%.1f ratio=%.2f unit=goroutines peer_name=controller-runtime-per-cluster\n", kg, pg, kg/pg)
	if one := got["peer"][0]; one.n == 1 {
		fmt.Printf("# a process per cluster instead: a one-cluster controller-runtime process holds %.1f MiB of heap in use, %d goroutines, %.1f MiB RSS (all of it, per cluster)\n",
			float64(one.inuse)/(1<<20), one.goroutines, float64(one.rss)/(1<<20))
	}

	times := map[string][]time.Duration{}
	for _, side := range sides {
		ts, err := joinChild(append([]string{"-child", side + "-join", "-clusters", strconv.Itoa(joins)}, common...), joins)
		if err != nil {
			return fmt.Errorf("%s joins: %w", side, err)
		}
		if err := setSecrets(ctx, home.kc, dir, 0); err != nil {
			return err
		}
		times[side] = ts
		fmt.Printf("# %s, Secret created to first reconcile, clusters 1..%d joined one at a time: %v\n", side, joins, ts)
	}
	km, pm := median(times["kloop"]), median(times["peer"])
	fmt.Printf("RESULT fleet-secret-to-reconcile-ms kloop=%.1f peer=%.1f ratio=%.2f unit=ms peer_name=controller-runtime-per-cluster\n",
		ms(km), ms(pm), float64(km)/float64(pm))
	fmt.Printf("# total %v\n", time.Since(began).Round(time.Second))
	return nil
}

func memberName(i int) string { return "c" + strconv.Itoa(i) }

// startPlanes starts n control planes, three at a time, each with
// namespace "bench".
func startPlanes(ctx context.Context, n int) ([]*plane, error) {
	planes := make([]*plane, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			env, err := testenv.Start(ctx, testenv.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			planes[i] = &plane{env: env}
			if planes[i].kc, err = kubernetes.NewForConfig(env.Config); err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = planes[i].kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		})
	}
	wg.Wait()
	return planes, errors.Join(errs...)
}

// setSecrets leaves exactly the kubeconfig Secrets of members 1..n in the
// home cluster.
func setSecrets(ctx context.Context, kc kubernetes.Interface, dir string, n int) error {
	secrets := kc.CoreV1().Secrets(namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	for i := 1; i <= n; i++ {
		s, err := kubeconfigSecret(dir, memberName(i))
		if err != nil {
			return err
		}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func kubeconfigSecret(dir, name string) (*corev1.Secret, error) {
	data, err := os.ReadFile(filepath.Join(dir, name+".kubeconfig"))
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{label: "true"}},
		Data:       map[string][]byte{"kubeconfig": data},
	}, nil
}

// sample is what a measuring child reports.
type sample struct {
	n          int
	inuse      int64 // HeapInuse after two GCs
	alloc      int64 // HeapAlloc after two GCs
	goroutines int64
	rss        int64
}

func measureChild(args []string) (sample, error) {
	c, err := childproc.Start(args...)
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	line, err := c.Expect("MEASURED")
	if err != nil {
		return sample{}, err
	}
	var s sample
	if _, err := fmt.Sscan(line, &s.inuse, &s.alloc, &s.goroutines, &s.rss); err != nil {
		return sample{}, fmt.Errorf("MEASURED %q: %w", line, err)
	}
	return s, nil
}

func joinChild(args []string, joins int) ([]time.Duration, error) {
	c, err := childproc.Start(args...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var ts []time.Duration
	for range joins {
		line, err := c.Expect("JOINED")
		if err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(line)
		if err != nil {
			return nil, err
		}
		ts = append(ts, d)
	}
	return ts, nil
}

// leastSquares is the slope of the line that fits (xs, ys) best.
func leastSquares(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	return num / den
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measure is the process's heap after two forced GCs, its goroutines and
// its RSS.
func measure() sample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return sample{inuse: int64(m.HeapInuse), alloc: int64(m.HeapAlloc), goroutines: int64(runtime.NumGoroutine()), rss: vmRSS()}
}

func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func writeProfiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	runtime.GC()
	h, err := os.Create(filepath.Join(dir, "fleet-kloop-heap.pprof"))
	if err != nil {
		return err
	}
	defer h.Close()
	if err := pprof.Lookup("heap").WriteTo(h, 0); err != nil {
		return err
	}
	g, err := os.Create(filepath.Join(dir, "fleet-kloop-goroutines.txt"))
	if err != nil {
		return err
	}
	defer g.Close()
	return pprof.Lookup("goroutine").WriteTo(g, 1)
}

// exitOnEOF ends the child when the parent closes its stdin (or dies).
func exitOnEOF() {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
}
