// Command events measures the path one change takes inside a controller
// process, from the informer's event stream to Reconcile, for a kloop
// controller (informer.Informer, controller.For, controller.Controller) and
// for a client-go controller written the sample-controller way (shared
// informer, an event handler that adds to a typed rate-limiting workqueue,
// worker goroutines). The workload, the same for both:
//
//	M ConfigMaps (default 2,000) in the initial list, then W waves (default
//	50) of M updates, one per ConfigMap, each a new resourceVersion; a wave
//	is sent once every key of the one before has been reconciled with its
//	new state. The reconciler reads the object from the cache.
//
// The stream is scripted in the process (kloop: an informer.Source; client-go:
// a ListWatch over a fake watch), with every object built before anything
// is measured, so that the figures count the informer, the hand-over to the
// queue and the workers, and nothing of the wire or of decoding (the
// informer and controller commands measure those, against a real API
// server). Figures:
//
//   - events-throughput: updates per second through the whole path, over
//     the W waves.
//   - events-allocs-per-event: runtime.MemStats.Mallocs over the W waves
//     divided by W·M (the reconciles included).
//   - events-goroutines-per-source: the goroutines a controller source
//     costs once running: the process's goroutines with 9 sources on one
//     informer minus those with 1, divided by 8.
//
// Each figure comes from R rounds (default 5), kloop and client-go back to
// back, alternating which goes first; a RESULT line gives each side's
// median.
//
// -only kloop (or client-go) runs one side alone, printing no RESULT line,
// for -cpuprofile, -memprofile (every allocation), -mutexprofile,
// -blockprofile (every contention, every blocking event) or -trace (an
// execution trace) to profile it.
//
// Run with: cd bench && go run ./cmd/events
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	cgcache "k8s.io/client-go/tools/cache"
	cgworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

const (
	namespace = "bench"
	workers   = 2
	// manySources is the source count the goroutine figure compares with one.
	manySources = 9
)

func main() {
	keys := flag.Int("keys", 2000, "ConfigMaps (M)")
	waves := flag.Int("waves", 50, "waves of one update per ConfigMap (W)")
	rounds := flag.Int("rounds", 5, "rounds (each runs kloop and client-go once)")
	only := flag.String("only", "", "run one side alone (kloop or client-go), for a profile of it; no RESULT lines")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	mutexProfile := flag.String("mutexprofile", "", "write a mutex contention profile of the whole run to this file")
	blockProfile := flag.String("blockprofile", "", "write a blocking profile of the whole run to this file")
	traceFile := flag.String("trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *keys < 1 || *waves < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "events benchmark: -keys, -waves and -rounds must be at least 1")
		os.Exit(2)
	}
	stop, err := startProfiles(profiles{cpu: *cpuProfile, mem: *memProfile, mutex: *mutexProfile, block: *blockProfile, trace: *traceFile})
	if err == nil {
		err = run(*keys, *waves, *rounds, *only)
		err = errors.Join(err, stop())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "events benchmark:", err)
		os.Exit(1)
	}
}

// profiles names the files the run's profiles go to; "" for none.
type profiles struct{ cpu, mem, mutex, block, trace string }

// startInto creates file and has start write into it; "" starts nothing.
func startInto(file string, start func(io.Writer) error) (*os.File, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// startProfiles starts a CPU profile into p.cpu and an execution trace into
// p.trace, records every allocation for a heap profile into p.mem, every
// mutex contention for p.mutex and every blocking event for p.block; stop
// writes them.
func startProfiles(p profiles) (stop func() error, err error) {
	cpuFile, err := startInto(p.cpu, pprof.StartCPUProfile)
	if err != nil {
		return nil, err
	}
	traceFile, err := startInto(p.trace, trace.Start)
	if err != nil {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		return nil, err
	}
	if p.mem != "" {
		runtime.MemProfileRate = 1
	}
	if p.mutex != "" {
		runtime.SetMutexProfileFraction(1)
	}
	if p.block != "" {
		runtime.SetBlockProfileRate(1)
	}
	write := func(name, file string) error {
		if file == "" {
			return nil
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		return errors.Join(pprof.Lookup(name).WriteTo(f, 0), f.Close())
	}
	return func() error {
		var err error
		if cpuFile != nil {
			pprof.StopCPUProfile()
			err = cpuFile.Close()
		}
		if traceFile != nil {
			trace.Stop()
			err = errors.Join(err, traceFile.Close())
		}
		return errors.Join(err, write("allocs", p.mem), write("mutex", p.mutex), write("block", p.block))
	}, nil
}

// result is one run of one side.
type result struct {
	elapsed    time.Duration // the W waves
	mallocs    uint64        // during the W waves
	allocated  uint64        // bytes allocated during the W waves
	cpu        time.Duration // the process's CPU time (user and system) during the W waves
	goroutines int           // once the initial list is reconciled
}

type side struct {
	name string
	run  func(m, waves, sources int) (result, error)
}

func run(m, waves, rounds int, only string) error {
	sides := [2]side{{"kloop", runKloop}, {"client-go", runClientGo}}
	var tput, allocs, gor [2][]float64
	for r := range rounds {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		switch only {
		case "":
		case sides[0].name:
			order = []int{0}
		case sides[1].name:
			order = []int{1}
		default:
			return fmt.Errorf("-only %q: give kloop or client-go", only)
		}
		for _, i := range order {
			s := sides[i]
			one, err := s.run(m, waves, 1)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			many, err := s.run(m, 1, manySources)
			if err != nil {
				return fmt.Errorf("%s with %d sources: %w", s.name, manySources, err)
			}
			events := float64(m * waves)
			tput[i] = append(tput[i], events/one.elapsed.Seconds())
			allocs[i] = append(allocs[i], float64(one.mallocs)/events)
			gor[i] = append(gor[i], float64(many.goroutines-one.goroutines)/float64(manySources-1))
			fmt.Printf("# round %d %s: %.0f events/s, %.2f µs CPU/event, %.1f allocs/event (%.0f B), goroutines %d (1 source) %d (%d sources)\n",
				r+1, s.name, events/one.elapsed.Seconds(), float64(one.cpu.Microseconds())/events, float64(one.mallocs)/events, float64(one.allocated)/events, one.goroutines, many.goroutines, manySources)
		}
	}
	if only != "" {
		return nil
	}
	k, p := median(tput[0]), median(tput[1])
	fmt.Printf("RESULT events-throughput kloop=%.0f peer=%.0f ratio=%.2f unit=events/s peer_name=client-go\n", k, p, k/p)
	k, p = median(allocs[0]), median(allocs[1])
	fmt.Printf("RESULT events-allocs-per-event kloop=%.2f peer=%.2f ratio=%.2f unit=allocs peer_name=client-go\n", k, p, k/p)
	k, p = median(gor[0]), median(gor[1])
	fmt.Printf("RESULT events-goroutines-per-source kloop=%.2f peer=%.2f ratio=%.2f unit=goroutines peer_name=client-go\n", k, p, ratio(k, p))
	return nil
}

func ratio(k, p float64) float64 {
	if p == 0 {
		return 0
	}
	return k / p
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// workload is every object one run sends: the initial list, then the
// waves. Each run builds its own, since an informer takes ownership of
// what it is given.
type workload struct {
	m       int
	initial []*corev1.ConfigMap
	waves   [][]*corev1.ConfigMap
}

// newWorkload builds the objects. Object i of wave w (wave 0 is the
// initial list) has resourceVersion w·m+i+1, so a reconciler can tell
// which wave it sees.
func newWorkload(m, waves int) *workload {
	wl := &workload{m: m, waves: make([][]*corev1.ConfigMap, waves)}
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	build := func(w int) []*corev1.ConfigMap {
		objs := make([]*corev1.ConfigMap, m)
		for i := range objs {
			objs[i] = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Namespace:       namespace,
					Name:            name(i),
					UID:             types.UID("uid-" + name(i)),
					ResourceVersion: strconv.Itoa(w*m + i + 1),
					Labels:          map[string]string{"app": "bench"},
				},
				Data: map[string]string{"payload": string(payload)},
			}
		}
		return objs
	}
	wl.initial = build(0)
	for w := range wl.waves {
		wl.waves[w] = build(w + 1)
	}
	return wl
}

func name(i int) string { return fmt.Sprintf("cm-%06d", i) }

// tracker follows the reconciles: which wave each key was last reconciled
// at, and when every key has reached the current one.
type tracker struct {
	m     int
	index map[string]int // name -> key index; read-only once built
	seen  []atomic.Int64
	wave  atomic.Int64
	left  atomic.Int64
	done  atomic.Pointer[chan struct{}]
}

func newTracker(m int) *tracker {
	t := &tracker{m: m, index: make(map[string]int, m), seen: make([]atomic.Int64, m)}
	for i := range m {
		t.index[name(i)] = i
		t.seen[i].Store(-1)
	}
	return t
}

// begin starts wave w and returns a channel closed once every key has been
// reconciled at it.
func (t *tracker) begin(w int) <-chan struct{} {
	ch := make(chan struct{})
	t.done.Store(&ch)
	t.left.Store(int64(t.m))
	t.wave.Store(int64(w))
	return ch
}

// saw records a reconcile that read the object name at resourceVersion rv.
func (t *tracker) saw(name, rv string) {
	i, ok := t.index[name]
	if !ok {
		return
	}
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	w := (v - 1) / int64(t.m)
	for {
		s := t.seen[i].Load()
		if w <= s {
			return
		}
		if t.seen[i].CompareAndSwap(s, w) {
			if w == t.wave.Load() && t.left.Add(-1) == 0 {
				close(*t.done.Load())
			}
			return
		}
	}
}

// measure sends the initial list and the waves, waiting for each to be
// reconciled. listed is t.begin(0), called before the side started.
func measure(wl *workload, t *tracker, listed <-chan struct{}, sendInitial func(), sendWave func(w int)) (result, error) {
	var res result
	wait := func(ch <-chan struct{}, what string) error {
		select {
		case <-ch:
			return nil
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("%s was not reconciled within 2 minutes", what)
		}
	}
	sendInitial()
	if err := wait(listed, "the initial list"); err != nil {
		return res, err
	}
	res.goroutines = runtime.NumGoroutine()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpuBefore := cpuTime()
	start := time.Now()
	for w := range wl.waves {
		ch := t.begin(w + 1)
		sendWave(w)
		if err := wait(ch, fmt.Sprintf("wave %d", w+1)); err != nil {
			return res, err
		}
	}
	res.elapsed = time.Since(start)
	res.cpu = cpuTime() - cpuBefore
	runtime.ReadMemStats(&after)
	res.mallocs = after.Mallocs - before.Mallocs
	res.allocated = after.TotalAlloc - before.TotalAlloc
	return res, nil
}

// cpuTime is the CPU time the process has used so far, 0 if unknown.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scripted is the kloop side's Source: it plays the batches it is sent.
type scripted struct {
	batches chan []watcher.Event[*corev1.ConfigMap]
}

func (s *scripted) Run(ctx context.Context, emit func(watcher.Event[*corev1.ConfigMap])) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-s.batches:
			for _, e := range b {
				emit(e)
			}
		}
	}
}

func (s *scripted) LastError() error { return nil }

func runKloop(m, waves, sources int) (result, error) {
	wl := newWorkload(m, waves)
	initial := make([]watcher.Event[*corev1.ConfigMap], 0, m+2)
	initial = append(initial, watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart})
	for _, o := range wl.initial {
		initial = append(initial, watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistItem, Object: o, ResourceVersion: o.ResourceVersion})
	}
	initial = append(initial, watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistDone, ResourceVersion: strconv.Itoa(m)})
	batches := make([][]watcher.Event[*corev1.ConfigMap], waves)
	for w, objs := range wl.waves {
		for _, o := range objs {
			batches[w] = append(batches[w], watcher.Event[*corev1.ConfigMap]{Type: watcher.Modified, Object: o, ResourceVersion: o.ResourceVersion})
		}
	}

	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	src := &scripted{batches: make(chan []watcher.Event[*corev1.ConfigMap])}
	inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Name: "bench", Logger: log, Registerer: reg})
	if err != nil {
		return result{}, err
	}
	lister := inf.Lister()
	t := newTracker(m)
	c, err := controller.New(controller.ReconcilerFunc[cache.Key](func(_ context.Context, k cache.Key) (controller.Result, error) {
		if o, ok := lister.Get(k.Namespace, k.Name); ok {
			t.saw(o.Name, o.ResourceVersion)
		}
		return controller.Result{}, nil
	}), controller.Options[cache.Key]{Name: "bench", Workers: workers, Logger: log, Registerer: reg})
	if err != nil {
		return result{}, err
	}
	for range sources {
		if err := c.Watch(controller.For(inf)); err != nil {
			return result{}, err
		}
	}
	listed := t.begin(0)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- inf.Start(ctx) })
	wg.Go(func() { errs <- c.Start(ctx) })
	res, err := measure(wl, t, listed, func() { src.batches <- initial }, func(w int) { src.batches <- batches[w] })
	cancel()
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return res, err
}

// unsupportedWatchList makes client-go's reflector list and then watch, as
// kloop's scripted source does, rather than ask the fake for a streaming list.
type unsupportedWatchList struct{ *cgcache.ListWatch }

func (unsupportedWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func runClientGo(m, waves, sources int) (result, error) {
	wl := newWorkload(m, waves)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(m)}}
	for _, o := range wl.initial {
		list.Items = append(list.Items, *o)
	}
	fw := apiwatch.NewFakeWithChanSize(m, false)
	var listCalled atomic.Bool
	lw := unsupportedWatchList{&cgcache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (kruntime.Object, error) {
			if listCalled.Swap(true) {
				return nil, errors.New("the fake lists once")
			}
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (apiwatch.Interface, error) {
			return fw, nil
		},
	}}
	inf := cgcache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
	lister := cgcache.NewGenericLister(inf.GetIndexer(), corev1.Resource("configmaps"))
	queue := cgworkqueue.NewTypedRateLimitingQueueWithConfig(
		cgworkqueue.DefaultTypedControllerRateLimiter[cgcache.ObjectName](),
		cgworkqueue.TypedRateLimitingQueueConfig[cgcache.ObjectName]{Name: "bench-" + strconv.Itoa(sources)})
	enqueue := func(obj any) {
		ref, err := cgcache.ObjectToName(obj)
		if err != nil {
			return
		}
		queue.Add(ref)
	}
	for range sources {
		if _, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cgcache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				enqueue(obj)
			},
		}); err != nil {
			return result{}, err
		}
	}
	t := newTracker(m)
	listed := t.begin(0)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				ref, shutdown := queue.Get()
				if shutdown {
					return
				}
				if o, err := lister.ByNamespace(ref.Namespace).Get(ref.Name); err == nil {
					cm := o.(*corev1.ConfigMap)
					t.saw(cm.Name, cm.ResourceVersion)
				}
				queue.Forget(ref)
				queue.Done(ref)
			}
		})
	}
	wg.Go(func() { inf.RunWithContext(ctx) })
	res, err := measure(wl, t, listed, func() {}, func(w int) {
		for _, o := range wl.waves[w] {
			fw.Modify(o)
		}
	})
	cancel()
	queue.ShutDown()
	wg.Wait()
	return res, err
}
