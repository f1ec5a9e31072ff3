// Command controller compares a kloop controller with a client-go controller
// written the sample-controller way (SharedInformerFactory, typed
// rate-limiting workqueue, worker goroutines) on one workload against a real
// API server that it starts itself (package testenv):
//
//	N ConfigMaps (default 5,000) are created in a fresh namespace by 32
//	concurrent writers with client-side rate limiting off, while the side
//	under test watches that namespace and reconciles every ConfigMap with a
//	no-op reconciler (a cache read) on 2 workers.
//
// Each side runs in a child process of its own (this binary re-executed),
// so that its memory is measured alone; the parent creates the ConfigMaps.
// A side's end-to-end time runs from the first create to the reconcile that
// completes the set of N distinct keys. Its memory is the Go heap in use
// after two forced GCs once all N are reconciled, with the controller and
// its cache still running (its VmRSS is printed for reference). Rounds
// alternate kloop, client-go, client-go, kloop, ... (5 per side by
// default); the time figure is the back-to-back pair of rounds (one of each
// side) with the median ratio, and memory is each side's mean. A third
// child that starts and measures itself without doing anything gives the
// baseline every child carries from this binary's package initialisation
// (both libraries are linked into it); the memory figure is each side's
// heap minus that baseline.
//
// With -debug idle the kloop side runs under a manager with the debug page
// on (package debug) and nobody looking; with -debug polled something reads
// the page's snapshot once a second while it works, as the page does. With
// -debug compare (or compare-polled) the two sides are both kloop under a
// manager, with the page (idle, or polled) and without it, and the RESULT
// lines are controller-debug-*: the page's cost within one run.
//
// Run with: cd bench && go run ./cmd/controller -n 5000 [-debug idle|polled|compare|compare-polled]
package main

import (
	"cmp"
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
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cgcache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	cgworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/bench/internal/childproc"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/testenv"
)

const (
	writers = 32
	workers = 2
)

func main() {
	n := flag.Int("n", 5000, "ConfigMaps per round")
	rounds := flag.Int("rounds", 5, "rounds per side (alternating kloop, client-go, client-go, kloop, ...)")
	child := flag.String("child", "", "internal: run one side (kloop or client-go) as a child process")
	kubeconfig := flag.String("kubeconfig", "", "internal: the child's kubeconfig")
	namespace := flag.String("namespace", "", "internal: the child's namespace")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "profiling aid: each child writes a CPU profile, from READY to DONE, to this path with the side's name appended")
	flag.StringVar(&debugMode, "debug", "off", "the kloop side's debug page: off; idle (served, nobody looks); polled (its snapshot read once a second); compare, compare-polled (kloop with the page, idle or polled, against kloop without it); internal for a child: managed (a manager, no page)")
	flag.StringVar(&memProfile, "memprofile", "", "profiling aid: each child writes a heap profile, after its measurement, to this path with the side's name appended")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *child != "" {
		if err := runChild(*child, *kubeconfig, *namespace, *n); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	if err := runParent(*n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "controller benchmark:", err)
		os.Exit(1)
	}
}

// measurement is one round of one side.
type measurement struct {
	e2e       time.Duration
	lag       time.Duration // from the last create's response to the last reconcile
	heapInuse uint64
	rss       uint64
	cpu       time.Duration // the side's own CPU time while the ConfigMaps were created
}

func runParent(n, rounds int) error {
	ctx := context.Background()
	env, err := testenv.Start(ctx, testenv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the writers are limited by the server only
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The sides: the subject (reported as kloop=) and its peer, and the
	// -debug each kloop child runs with.
	subject, peer, peerName, figure := "kloop", "client-go", "client-go", "controller"
	childDebug := map[string]string{"kloop": debugMode, "client-go": "off"}
	switch debugMode {
	case "off", "idle", "polled":
	case "compare", "compare-polled":
		peer, peerName, figure = "kloop-nopage", "kloop-without-page", "controller-debug"
		childDebug["kloop"], childDebug[peer] = strings.TrimPrefix(strings.TrimPrefix(debugMode, "compare"), "-"), "managed"
		if childDebug["kloop"] == "" {
			childDebug["kloop"] = "idle"
		}
	default:
		return fmt.Errorf("-debug %q: want off, idle, polled, compare or compare-polled", debugMode)
	}
	fmt.Printf("controller benchmark: N=%d ConfigMaps, %d writers, %d workers per side, each side in its own child process, GOMAXPROCS=%d, kloop's debug page %s\n",
		n, writers, workers, runtime.GOMAXPROCS(0), debugMode)

	base, err := measureBaseline()
	if err != nil {
		return err
	}
	fmt.Printf("  baseline (this binary, nothing running) heap in use %.1f MiB  VmRSS %.1f MiB\n",
		float64(base.heapInuse)/(1<<20), float64(base.rss)/(1<<20))

	results := map[string][]measurement{}
	var seconds []float64 // e2e of each round, in the order run
	order := []string{}
	for r := range rounds {
		if r%2 == 0 {
			order = append(order, subject, peer)
		} else {
			order = append(order, peer, subject)
		}
	}
	for i, side := range order {
		ns := fmt.Sprintf("bench-%d-%s", i, side)
		m, err := runRound(ctx, kc, env.KubeconfigPath, side, childDebug[side], ns, n)
		if err != nil {
			return fmt.Errorf("round %d (%s): %w", i+1, side, err)
		}
		fmt.Printf("  round %d %-12s e2e %6.2fs  lag after the last create %6.0f ms  CPU %5.0f ms  heap in use %6.1f MiB  VmRSS %6.1f MiB\n",
			i+1, side, m.e2e.Seconds(), float64(m.lag)/1e6, m.cpu.Seconds()*1000, float64(m.heapInuse)/(1<<20), float64(m.rss)/(1<<20))
		results[side] = append(results[side], m)
		seconds = append(seconds, m.e2e.Seconds())
		// Free the server's memory for the next round.
		if err := kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	mean := func(side string, f func(measurement) float64) float64 {
		var s float64
		for _, m := range results[side] {
			s += f(m)
		}
		return s / float64(len(results[side]))
	}
	median := func(side string, f func(measurement) float64) float64 {
		var v []float64
		for _, m := range results[side] {
			v = append(v, f(m))
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	// Time: rounds run in pairs (one of each side, back to back), so the
	// two sides of a pair see the same machine and server load; the pair
	// with the median kloop/client-go ratio is reported. Load that drifts
	// over the run then moves both sides of a pair together instead of
	// deciding which side's median round was luckier.
	type pair struct{ k, p float64 }
	var pairs []pair
	for i := 0; i+1 < len(order); i += 2 {
		a, b := seconds[i], seconds[i+1]
		if order[i] != subject {
			a, b = b, a
		}
		pairs = append(pairs, pair{a, b})
	}
	slices.SortFunc(pairs, func(x, y pair) int { return cmp.Compare(x.k/x.p, y.k/y.p) })
	mid := pairs[len(pairs)/2]
	e2eK, e2eP := mid.k, mid.p
	lagK := median(subject, func(m measurement) float64 { return m.lag.Seconds() * 1000 })
	lagP := median(peer, func(m measurement) float64 { return m.lag.Seconds() * 1000 })
	heapK := mean(subject, func(m measurement) float64 { return float64(m.heapInuse) - float64(base.heapInuse) })
	heapP := mean(peer, func(m measurement) float64 { return float64(m.heapInuse) - float64(base.heapInuse) })
	cpuK := median(subject, func(m measurement) float64 { return m.cpu.Seconds() * 1000 })
	cpuP := median(peer, func(m measurement) float64 { return m.cpu.Seconds() * 1000 })
	rssK := mean(subject, func(m measurement) float64 { return float64(m.rss) })
	rssP := mean(peer, func(m measurement) float64 { return float64(m.rss) })
	fmt.Printf("RESULT %s-e2e-seconds kloop=%.3f peer=%.3f ratio=%.2f unit=s peer_name=%s\n", figure, e2eK, e2eP, e2eK/e2eP, peerName)
	fmt.Printf("RESULT %s-rss-bytes kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=%s\n", figure, heapK, heapP, heapK/heapP, peerName)
	fmt.Printf("# controller-e2e-seconds is the back-to-back pair of rounds with the median ratio; median lag from the last create's response to the last reconcile: kloop=%.0f ms peer=%.0f ms\n", lagK, lagP)
	fmt.Printf("# CPU time each side used from its first event to its last reconcile (median; it shares 2 cores with the API server): kloop=%.0f ms peer=%.0f ms ratio=%.2f\n", cpuK, cpuP, cpuK/cpuP)
	fmt.Printf("# controller-rss-bytes is retained Go heap: heap in use after GC in each side's own process (cache and controller running) minus the baseline process's; whole-process VmRSS kloop=%.0f peer=%.0f ratio=%.2f\n",
		rssK, rssP, rssK/rssP)
	return nil
}

// measureBaseline runs a child that does nothing but measure itself: the
// heap every child has from this binary's package initialisation alone.
// The lowest of three counts.
func measureBaseline() (measurement, error) {
	var best measurement
	for i := range 3 {
		out, err := exec.Command(os.Args[0], "-child", "baseline").Output()
		if err != nil {
			return measurement{}, fmt.Errorf("baseline child: %w", err)
		}
		var m measurement
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "MEM heap_inuse=%d rss=%d", &m.heapInuse, &m.rss); err != nil {
			return measurement{}, fmt.Errorf("baseline child said %q: %w", out, err)
		}
		if i == 0 || m.heapInuse < best.heapInuse {
			best = m
		}
	}
	return best, nil
}

// runRound starts a child for side watching ns, creates n ConfigMaps in ns
// once the child is synced, and collects the child's figures.
func runRound(ctx context.Context, kc kubernetes.Interface, kubeconfig, side, childDebug, ns string, n int) (measurement, error) {
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return measurement{}, err
	}
	child, err := childproc.Start("-child", side, "-kubeconfig", kubeconfig, "-namespace", ns, "-n", strconv.Itoa(n), "-memprofile", memProfile, "-cpuprofile", cpuProfile, "-debug", childDebug)
	if err != nil {
		return measurement{}, err
	}
	defer child.Close() // the child exits on EOF
	expect := child.Expect
	if _, err := expect("READY"); err != nil {
		return measurement{}, err
	}

	first := time.Now()
	if err := createConfigMaps(ctx, kc, ns, n); err != nil {
		return measurement{}, err
	}
	lastCreated := time.Now()
	doneAt, err := expect("DONE")
	if err != nil {
		return measurement{}, err
	}
	last, err := strconv.ParseInt(doneAt, 10, 64)
	if err != nil {
		return measurement{}, err
	}
	cpu, err := expect("CPU")
	if err != nil {
		return measurement{}, err
	}
	cpuNS, err := strconv.ParseInt(cpu, 10, 64)
	if err != nil {
		return measurement{}, err
	}
	mem, err := expect("MEM")
	if err != nil {
		return measurement{}, err
	}
	var m measurement
	if _, err := fmt.Sscanf(mem, "heap_inuse=%d rss=%d", &m.heapInuse, &m.rss); err != nil {
		return measurement{}, fmt.Errorf("parse %q: %w", mem, err)
	}
	m.e2e = time.Unix(0, last).Sub(first)
	m.cpu = time.Duration(cpuNS)
	m.lag = time.Unix(0, last).Sub(lastCreated)
	return m, nil
}

func createConfigMaps(ctx context.Context, kc kubernetes.Interface, ns string, n int) error {
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
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"bench": "controller"}},
					Data:       map[string]string{"index": strconv.FormatInt(i, 10), "payload": "some configuration value"},
				}
				if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
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

// seen counts distinct keys and notes when the n-th arrives.
type seen struct {
	mu     sync.Mutex
	keys   map[string]struct{}
	n      int
	doneAt chan int64
}

func newSeen(n int) *seen {
	return &seen{keys: make(map[string]struct{}, n), n: n, doneAt: make(chan int64, 1)}
}

func (s *seen) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return
	}
	s.keys[key] = struct{}{}
	if len(s.keys) == s.n {
		s.doneAt <- time.Now().UnixNano()
	}
}

// runChild runs one side until stdin closes, printing READY once synced,
// DONE <unix ns> once n distinct keys were reconciled, then CPU <ns> (the
// process's CPU time, user and system, from READY to DONE), then MEM.
func runChild(side, kubeconfig, ns string, n int) error {
	if memProfile != "" {
		runtime.MemProfileRate = 1
	}
	if side == "baseline" {
		printMem()
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	s := newSeen(n)
	var wait func() error
	switch side {
	case "kloop", "kloop-nopage":
		wait, err = runKloop(ctx, cfg, ns, s)
	case "client-go":
		wait, err = runClientGo(ctx, cfg, ns, s)
	default:
		err = fmt.Errorf("unknown side %q", side)
	}
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile + "." + side)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpu0 := cpuTime()
	fmt.Println("READY")
	select {
	case at := <-s.doneAt:
		fmt.Println("DONE", at)
	case <-ctx.Done():
		return errors.New("stopped before every key was reconciled")
	}
	fmt.Println("CPU", int64(cpuTime()-cpu0))
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	printMem()
	if memProfile != "" {
		if err := writeHeapProfile(memProfile + "." + side); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return wait()
}

var memProfile, cpuProfile, debugMode string

// printMem prints the heap in use after two forced collections, and VmRSS.
func printMem() {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("MEM heap_inuse=%d rss=%d\n", ms.HeapInuse, vmRSS())
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// vmRSS reads the process's resident set size from /proc.
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

// runKloop starts an informer factory and a controller with a no-op
// reconciler (a cache read) and returns once the cache has synced.
func runKloop(ctx context.Context, cfg *rest.Config, ns string, s *seen) (wait func() error, err error) {
	log := slog.New(slog.DiscardHandler)
	f := informer.NewFactory(cfg, informer.FactoryOptions{Logger: log})
	cms, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		return nil, err
	}
	lister := cms.Lister()
	c, err := controller.New(controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		if _, ok := lister.Get(k.Namespace, k.Name); ok {
			s.add(k.String())
		}
		return controller.Result{}, nil
	}), controller.Options[cache.Key]{Name: "bench", Workers: workers, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := c.Watch(controller.For(cms)); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	if debugMode == "off" {
		wg.Go(func() { errs <- f.Start(ctx) })
		wg.Go(func() { errs <- c.Start(ctx) })
	} else if err := runWithDebugPage(ctx, &wg, errs, log, f, c); err != nil {
		return nil, err
	}
	wait = func() error {
		wg.Wait()
		close(errs)
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		return errors.Join(all...)
	}
	if err := f.WaitForSync(ctx); err != nil {
		return nil, errors.Join(err, wait())
	}
	return wait, nil
}

// runWithDebugPage runs the factory and the controller under a manager:
// with the debug page on a free loopback port (-debug idle, polled) and,
// with -debug polled, its snapshot read once a second, as the page does
// while someone looks; without the page for -debug managed.
func runWithDebugPage(ctx context.Context, wg *sync.WaitGroup, errs chan<- error, log *slog.Logger, f *informer.Factory, c *controller.Controller[cache.Key]) error {
	m, err := manager.New(manager.Options{Logger: log})
	if err != nil {
		return err
	}
	for _, r := range []manager.Runnable{f, c} {
		if err := m.Add(r); err != nil {
			return err
		}
	}
	if debugMode == "managed" {
		wg.Go(func() { errs <- m.Start(ctx) })
		return nil
	}
	srv, err := debug.New(m, debug.Options{Addr: "127.0.0.1:0", Logger: log})
	if err != nil {
		return err
	}
	if err := m.Add(srv); err != nil {
		return err
	}
	wg.Go(func() { errs <- m.Start(ctx) })
	<-srv.AddrReady()
	if srv.URL() == "" {
		return errors.New("the debug page did not start")
	}
	if debugMode == "polled" {
		url := srv.SnapshotURL()
		wg.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				resp, err := http.Get(url)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	return nil
}

// runClientGo is the sample-controller way: a shared informer factory, a
// typed rate-limiting queue keyed by cache.ObjectName, and workers that
// Get, sync from the lister, Forget or AddRateLimited, and Done.
func runClientGo(ctx context.Context, cfg *rest.Config, ns string, s *seen) (wait func() error, err error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	cmInformer := factory.Core().V1().ConfigMaps()
	lister := cmInformer.Lister()
	queue := cgworkqueue.NewTypedRateLimitingQueueWithConfig(
		cgworkqueue.DefaultTypedControllerRateLimiter[cgcache.ObjectName](),
		cgworkqueue.TypedRateLimitingQueueConfig[cgcache.ObjectName]{Name: "bench"})
	enqueue := func(obj any) {
		ref, err := cgcache.ObjectToName(obj)
		if err != nil {
			return
		}
		queue.Add(ref)
	}
	if _, err := cmInformer.Informer().AddEventHandler(cgcache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cgcache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			enqueue(obj)
		},
	}); err != nil {
		return nil, err
	}
	syncHandler := func(ref cgcache.ObjectName) error {
		_, err := lister.ConfigMaps(ref.Namespace).Get(ref.Name)
		if err == nil {
			s.add(ref.String())
		}
		return nil
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wait = func() error {
		queue.ShutDown()
		wg.Wait()
		factory.Shutdown()
		return nil
	}
	if ok := cgcache.WaitForCacheSync(ctx.Done(), cmInformer.Informer().HasSynced); !ok {
		return nil, errors.Join(errors.New("client-go cache did not sync"), wait())
	}
	for range workers {
		wg.Go(func() {
			for {
				ref, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := syncHandler(ref); err != nil {
					queue.AddRateLimited(ref)
				} else {
					queue.Forget(ref)
				}
				queue.Done(ref)
			}
		})
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	return wait, nil
}

// cpuTime is the CPU time, user and system, this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
