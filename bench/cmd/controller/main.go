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
// With -compare REV[,REV...] the peers are kloop itself at those git
// revisions of this repository: the benchmark as it was at each is built
// from an export of its tree in a temporary directory (removed after), and
// its kloop side runs in the rotation (RESULT controller-vs-<commit>-*).
// With -trace the peer is kloop with tracing off and the subject kloop
// with tracing on, as an App with OTEL_EXPORTER_OTLP_ENDPOINT set and
// Options.Traces from package otlp has it (the default queue and
// batch, OTEL_BSP_*), exporting to an OTLP/HTTP endpoint in the parent on loopback
// that decodes each request and counts its spans (RESULT
// controller-trace-*, and the spans received and dropped). The traced
// child is this benchmark built with -tags benchtrace, the only build
// that links package otlp: the peer, like every other child, links no
// exporter, as a program that does not trace.
//
// With more than two sides, each group of rounds has one round of each and
// the order rotates from group to group.
//
// Run with: cd bench && go run ./cmd/controller -n 5000 [-debug idle|polled|compare|compare-polled] [-compare REV,...] [-trace]
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
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
	flag.StringVar(&compareRevs, "compare", "", "compare kloop as it is with kloop at these git revisions of this repository (comma-separated), each built from an export of its tree into a temporary directory, instead of with client-go: RESULT controller-vs-<commit>-*")
	flag.BoolVar(&traceCompare, "trace", false, "compare kloop with tracing on, exporting to a counting OTLP/HTTP sink on loopback, against kloop with it off, instead of with client-go: RESULT controller-trace-*")
	flag.StringVar(&traceEndpoint, "trace-endpoint", "", "internal for a child: trace its reconciles to this OTLP/HTTP endpoint (as OTEL_EXPORTER_OTLP_ENDPOINT)")
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
	load      float64       // the machine's 1-minute load average when the round ended
	spans     int64         // -trace: spans the sink received from the round
	dropped   int64         // -trace: spans the child dropped
}

// side is one of the controllers a run compares.
type side struct {
	name  string // as reported: kloop, client-go, kloop@<rev>, ...
	child string // the -child it runs
	bin   string // the binary it runs; "" for this one
	debug string // its -debug
	trace bool   // kloop with traces to the sink
	base  measurement
}

func runParent(n, rounds int) error {
	ctx := context.Background()
	// The sides: the subject (reported as kloop=) first, then its peers,
	// and the -debug each kloop child runs with.
	subject := &side{name: "kloop", child: "kloop", debug: debugMode}
	peers := []*side{{name: "client-go", child: "client-go", debug: "off"}}
	figure := func(*side) string { return "controller" }
	switch debugMode {
	case "off", "idle", "polled":
	case "compare", "compare-polled":
		subject.debug = cmp.Or(strings.TrimPrefix(strings.TrimPrefix(debugMode, "compare"), "-"), "idle")
		peers = []*side{{name: "kloop-without-page", child: "kloop-nopage", debug: "managed"}}
		figure = func(*side) string { return "controller-debug" }
	default:
		return fmt.Errorf("-debug %q: want off, idle, polled, compare or compare-polled", debugMode)
	}
	var sink *traceSink
	if traceCompare {
		if compareRevs != "" || len(peers) != 1 || peers[0].name != "client-go" {
			return errors.New("-trace goes alone: not with -compare or -debug")
		}
		var err error
		if sink, err = startTraceSink(); err != nil {
			return err
		}
		defer sink.close()
		// The subject is this benchmark built with package otlp (the
		// benchtrace tag), as a program that traces is; the peer is this
		// binary, which links no exporter, as a program that does not.
		dir, err := os.MkdirTemp("", "controller-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		subject.bin = filepath.Join(dir, "controller-traced")
		fmt.Println("building the benchmark with -tags benchtrace ...")
		build := exec.Command("go", "build", "-tags", "benchtrace", "-o", subject.bin, "github.com/kloop-dev/kloop/bench/cmd/controller")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("-trace: building the benchmark with -tags benchtrace (run it inside kloop's bench module): %w", err)
		}
		subject.trace = true
		peers = []*side{{name: "kloop-without-traces", child: "kloop", debug: debugMode}}
		figure = func(*side) string { return "controller-trace" }
	}
	if compareRevs != "" {
		dir, err := os.MkdirTemp("", "controller-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		peers = nil
		for _, rev := range strings.Split(compareRevs, ",") {
			s, err := buildRevision(dir, strings.TrimSpace(rev))
			if err != nil {
				return err
			}
			s.debug = debugMode
			peers = append(peers, s)
		}
		figure = func(p *side) string { return "controller-vs-" + strings.TrimPrefix(p.name, "kloop@") }
	}
	sides := append([]*side{subject}, peers...)

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
	names := []string{}
	for _, s := range sides {
		names = append(names, s.name)
	}
	fmt.Printf("controller benchmark: N=%d ConfigMaps, %d writers, %d workers per side, each side in its own child process, GOMAXPROCS=%d, kloop's debug page %s; sides %s; load average %.2f\n",
		n, writers, workers, runtime.GOMAXPROCS(0), debugMode, strings.Join(names, ", "), loadAverage())

	for _, s := range sides {
		if s.base, err = measureBaseline(s.bin); err != nil {
			return err
		}
		fmt.Printf("  baseline of %s's binary (nothing running) heap in use %.1f MiB  VmRSS %.1f MiB\n",
			s.name, float64(s.base.heapInuse)/(1<<20), float64(s.base.rss)/(1<<20))
	}

	// Rounds run in groups of one round of each side, back to back; the
	// order rotates from group to group (kloop, client-go; client-go,
	// kloop; ... with two sides), so that each side goes first as often.
	results := map[*side][]measurement{}
	i := 0
	for r := range rounds {
		for j := range sides {
			s := sides[(j+r)%len(sides)]
			ns := fmt.Sprintf("bench-%d-side-%d", i, (j+r)%len(sides))
			i++
			m, err := runRound(ctx, kc, env.KubeconfigPath, s, ns, n, sink)
			if err != nil {
				return fmt.Errorf("round %d (%s): %w", i, s.name, err)
			}
			fmt.Printf("  round %2d %-20s e2e %6.2fs  lag after the last create %6.0f ms  CPU %5.0f ms  heap in use %6.1f MiB  VmRSS %6.1f MiB  load %5.2f",
				i, s.name, m.e2e.Seconds(), float64(m.lag)/1e6, m.cpu.Seconds()*1000, float64(m.heapInuse)/(1<<20), float64(m.rss)/(1<<20), m.load)
			if s.trace {
				fmt.Printf("  spans received %d dropped %d", m.spans, m.dropped)
			}
			fmt.Println()
			results[s] = append(results[s], m)
			// Free the server's memory for the next round.
			if err := kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
	}
	// Time and CPU: the two sides of one group see the same machine and
	// server load; the group with the median ratio is reported, so that
	// load drifting over the run moves both sides of a group together
	// instead of deciding which side's median round was luckier.
	pick := func(p *side, f func(measurement) float64) (k, q float64, ratios []float64) {
		type pair struct{ k, p float64 }
		var pairs []pair
		for r := range results[p] {
			pairs = append(pairs, pair{f(results[subject][r]), f(results[p][r])})
		}
		slices.SortFunc(pairs, func(x, y pair) int { return cmp.Compare(x.k/x.p, y.k/y.p) })
		for _, x := range pairs {
			ratios = append(ratios, x.k/x.p)
		}
		mid := pairs[len(pairs)/2]
		return mid.k, mid.p, ratios
	}
	stat := func(s *side, f func(measurement) float64) (mean, lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, m := range results[s] {
			v := f(m)
			mean += v / float64(len(results[s]))
			lo, hi = min(lo, v), max(hi, v)
		}
		return mean, lo, hi
	}
	loads := func(s *side) string {
		_, lo, hi := stat(s, func(m measurement) float64 { return m.load })
		return fmt.Sprintf("%.1f–%.1f", lo, hi)
	}
	e2e := func(m measurement) float64 { return m.e2e.Seconds() }
	cpu := func(m measurement) float64 { return m.cpu.Seconds() * 1000 }
	lag := func(m measurement) float64 { return m.lag.Seconds() * 1000 }
	rss := func(m measurement) float64 { return float64(m.rss) }
	for _, p := range peers {
		heap := func(s *side) func(m measurement) float64 {
			return func(m measurement) float64 { return float64(m.heapInuse) - float64(s.base.heapInuse) }
		}
		tk, tp, tr := pick(p, e2e)
		ck, cp, cr := pick(p, cpu)
		lk, lp, _ := pick(p, lag)
		hk, hklo, hkhi := stat(subject, heap(subject))
		hp, hplo, hphi := stat(p, heap(p))
		rk, _, _ := stat(subject, rss)
		rp, _, _ := stat(p, rss)
		name := figure(p)
		fmt.Printf("RESULT %s-e2e-seconds kloop=%.3f peer=%.3f ratio=%.2f unit=s peer_name=%s\n", name, tk, tp, tk/tp, p.name)
		fmt.Printf("RESULT %s-rss-bytes kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=%s\n", name, hk, hp, hk/hp, p.name)
		fmt.Printf("RESULT %s-cpu-ms kloop=%.0f peer=%.0f ratio=%.2f unit=ms peer_name=%s\n", name, ck, cp, ck/cp, p.name)
		fmt.Printf("# %s: %d groups, load average %s; time ratios %s; CPU ratios %s (the group with the median ratio is reported)\n",
			p.name, len(results[p]), loads(p), fmtRatios(tr), fmtRatios(cr))
		fmt.Printf("# %s: lag from the last create's response to the last reconcile in the median-time group: kloop=%.0f ms peer=%.0f ms\n", p.name, lk, lp)
		fmt.Printf("# %s: retained Go heap is heap in use after GC in each side's own process (cache and controller running) minus its binary's baseline process's, mean of the rounds: kloop %.0f (%.0f–%.0f) peer %.0f (%.0f–%.0f); whole-process VmRSS kloop=%.0f peer=%.0f ratio=%.2f\n",
			p.name, hk, hklo, hkhi, hp, hplo, hphi, rk, rp, rk/rp)
	}
	if subject.trace {
		var spans, dropped int64
		for _, m := range results[subject] {
			spans += m.spans
			dropped += m.dropped
		}
		fmt.Printf("RESULT controller-trace-spans received=%d dropped=%d reconciles=%d unit=spans\n", spans, dropped, len(results[subject])*n)
	}
	return nil
}

func fmtRatios(r []float64) string {
	var b strings.Builder
	for i, v := range r {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.2f", v)
	}
	return b.String()
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// buildRevision builds this benchmark as it was at git revision rev of
// the repository it is in (kloop and the bench module both at rev), from
// an export of that tree under dir, and returns a side that runs it.
func buildRevision(dir, rev string) (*side, error) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return nil, fmt.Errorf("-compare %s: run it inside kloop's git repository: %w", rev, err)
	}
	short, err := exec.Command("git", "rev-parse", "--short", rev+"^{commit}").Output()
	if err != nil {
		return nil, fmt.Errorf("-compare %s: not a commit of this repository: %w", rev, err)
	}
	id := strings.TrimSpace(string(short))
	tree := filepath.Join(dir, id)
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return nil, err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", strings.TrimSpace(string(top)), id, tree)
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return nil, fmt.Errorf("-compare %s: exporting the tree: %w", rev, err)
	}
	bin := filepath.Join(dir, "controller-"+id)
	fmt.Printf("building the benchmark at %s (kloop@%s) ...\n", rev, id)
	build := exec.Command("go", "build", "-o", bin, "./cmd/controller")
	build.Dir = filepath.Join(tree, "bench")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("-compare %s: building its bench/cmd/controller: %w", rev, err)
	}
	return &side{name: "kloop@" + id, child: "kloop", bin: bin}, nil
}

// measureBaseline runs a child that does nothing but measure itself: the
// heap every child has from this binary's package initialisation alone.
// The lowest of three counts.
func measureBaseline(bin string) (measurement, error) {
	var best measurement
	for i := range 3 {
		out, err := exec.Command(cmp.Or(bin, os.Args[0]), "-child", "baseline").Output()
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
func runRound(ctx context.Context, kc kubernetes.Interface, kubeconfig string, s *side, ns string, n int, sink *traceSink) (measurement, error) {
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return measurement{}, err
	}
	// Profiles are written to the path with the -child appended: a side
	// of another build gets its own path.
	profile := func(path string) string {
		if path == "" || s.bin == "" {
			return path
		}
		return path + "." + strings.TrimPrefix(s.name, "kloop@")
	}
	args := []string{"-child", s.child, "-kubeconfig", kubeconfig, "-namespace", ns, "-n", strconv.Itoa(n),
		"-memprofile", profile(memProfile), "-cpuprofile", profile(cpuProfile), "-debug", s.debug}
	if s.trace {
		args = append(args, "-trace-endpoint", sink.url)
		sink.spans.Store(0)
	}
	child, err := childproc.StartProgram(cmp.Or(s.bin, os.Args[0]), args...)
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
	m.load = loadAverage()
	if s.trace {
		// The child has sent what it kept (it stops its exporter after
		// MEM) and says how many it dropped.
		tr, err := expect("TRACE")
		if err != nil {
			return measurement{}, err
		}
		if _, err := fmt.Sscanf(tr, "dropped=%d", &m.dropped); err != nil {
			return measurement{}, fmt.Errorf("parse %q: %w", tr, err)
		}
		m.spans = sink.spans.Load()
	}
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
	if stopTracing != nil {
		sctx, stop := context.WithTimeout(ctx, time.Minute)
		dropped, err := stopTracing(sctx)
		stop()
		if err != nil {
			return err
		}
		fmt.Printf("TRACE dropped=%d\n", dropped)
	}
	<-ctx.Done()
	return wait()
}

var (
	memProfile, cpuProfile, debugMode string
	compareRevs, traceEndpoint        string
	traceCompare                      bool
	// stopTracing, set in a child with -trace-endpoint, sends the spans
	// still queued and returns how many its exporter dropped.
	stopTracing func(context.Context) (dropped int64, err error)
)

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
	opts := controller.Options[cache.Key]{Name: "bench", Workers: workers, Logger: log}
	if traceEndpoint != "" {
		if opts.Tracer, stopTracing, err = startTracing(traceEndpoint, log); err != nil {
			return nil, err
		}
	}
	c, err := controller.New(controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		if _, ok := lister.Get(k.Namespace, k.Name); ok {
			s.add(k.String())
		}
		return controller.Result{}, nil
	}), opts)
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
	if srv.URL(debug.PagePath) == "" {
		return errors.New("the debug page did not start")
	}
	if debugMode == "polled" {
		url := srv.URL(debug.SnapshotPath)
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

// traceSink is an OTLP/HTTP endpoint on loopback that decodes each
// export request (protobuf, as kloop's exporter sends it) and counts its
// spans: a receiver that costs the sender what a collector's would, and
// keeps nothing.
type traceSink struct {
	url   string
	srv   *http.Server
	spans atomic.Int64
}

func startTraceSink() (*traceSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &traceSink{url: "http://" + l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var n int64
		if err == nil {
			n, err = countSpans(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		t.spans.Add(n)
		// An empty ExportTraceServiceResponse: a message with no field
		// is no bytes.
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(l) }()
	return t, nil
}

func (t *traceSink) close() { _ = t.srv.Close() }

// countSpans counts the spans of an ExportTraceServiceRequest
// (resource_spans = 1, each ResourceSpans' scope_spans = 2, each
// ScopeSpans' spans = 2), reading the wire format field by field, so that
// the benchmark's binary links no generated OTLP package (which brings
// gRPC and grpc-gateway) into the children it measures.
func countSpans(req []byte) (int64, error) {
	var n int64
	err := eachField(req, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// eachField calls f with each length-delimited field num of the message b.
func eachField(b []byte, num protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil
}
