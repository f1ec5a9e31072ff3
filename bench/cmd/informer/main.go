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
//     informer (informer.OfMetadata), against client-go's default full
//     informer: what a controller that needs only names, labels and owners
//     pays with each.
//   - informer-event-latency-p99: both informers run at once and see the
//     same writes; a write is a merge patch of one annotation (a sequence
//     number) on a distinct ConfigMap, and its latency runs from just before
//     the PATCH is sent to the handler's OnUpdate for that sequence number.
//
// Sync and memory are measured in rounds; each round runs kloop, client-go
// and kloop-metadata one after the other, one at a time, in a rotating
// order, each starting from a fresh informer after the previous one was
// stopped and collected. RESULT lines give each side's median.
//
// Run with: cd bench && go run ./cmd/informer -n 20000
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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
	n := flag.Int("n", 20000, "ConfigMaps to seed")
	rounds := flag.Int("rounds", 3, "sync/memory rounds (each measures every side once)")
	updates := flag.Int("updates", 3000, "writes timed for the latency figure")
	flag.BoolVar(&noSharing, "kloop-no-sharing", false, "turn off kloop's sharing of repeated metadata (informer.Memory.Unshared), to see what it saves")
	flag.Var(&kloopList, "kloop-initial-list", "kloop's initial list mode: auto (the default), streaming or paginated")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "profiling aid: write a CPU profile of each side's sync to this path with the side's name appended")
	flag.StringVar(&memProfile, "memprofile", "", "profiling aid: write a heap profile of each side, taken when its memory is measured, to this path with the side's name appended")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if err := run(*n, *rounds, *updates); err != nil {
		fmt.Fprintln(os.Stderr, "informer benchmark:", err)
		os.Exit(1)
	}
}

func run(n, rounds, updates int) error {
	ctx := context.Background()
	began := time.Now()
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
	fmt.Printf("informer benchmark: N=%d ConfigMaps (512-byte payload, 2 labels), %d rounds, %d timed writes, GOMAXPROCS=%d\n",
		n, rounds, updates, runtime.GOMAXPROCS(0))

	seeded := time.Now()
	if err := seed(ctx, kc, n); err != nil {
		return err
	}
	fmt.Printf("  seeded %d ConfigMaps in %.1fs\n", n, time.Since(seeded).Seconds())

	sides := []side{
		{"kloop", runKloop},
		{"client-go", runClientGo},
		{"kloop-metadata", runKloopMetadata},
	}
	results := map[string][]measurement{}
	for r := range rounds {
		for i := range sides {
			s := sides[(i+r)%len(sides)]
			m, err := measure(ctx, cfg, s, n)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, s.name, err)
			}
			fmt.Printf("  round %d %-15s sync %6.3fs  retained heap %7.1f MiB  %6.0f B/object\n",
				r+1, s.name, m.sync.Seconds(), float64(m.heap)/(1<<20), m.bytesPerObject(n))
			results[s.name] = append(results[s.name], m)
		}
	}
	syncK := median(results["kloop"], func(m measurement) float64 { return m.sync.Seconds() })
	syncP := median(results["client-go"], func(m measurement) float64 { return m.sync.Seconds() })
	bytesK := median(results["kloop"], func(m measurement) float64 { return m.bytesPerObject(n) })
	bytesP := median(results["client-go"], func(m measurement) float64 { return m.bytesPerObject(n) })
	bytesM := median(results["kloop-metadata"], func(m measurement) float64 { return m.bytesPerObject(n) })
	syncM := median(results["kloop-metadata"], func(m measurement) float64 { return m.sync.Seconds() })

	latK, latP, err := latency(ctx, cfg, kc, n, updates)
	if err != nil {
		return err
	}
	p := func(v []time.Duration, q float64) float64 {
		return float64(v[min(len(v)-1, int(q*float64(len(v))))]) / 1e6
	}
	fmt.Printf("  latency over %d writes: kloop p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms; client-go p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms\n",
		len(latK), p(latK, .5), p(latK, .9), p(latK, .99), p(latK, 1), p(latP, .5), p(latP, .9), p(latP, .99), p(latP, 1))

	fmt.Printf("RESULT informer-sync-seconds kloop=%.3f peer=%.3f ratio=%.2f unit=s peer_name=client-go\n", syncK, syncP, syncK/syncP)
	fmt.Printf("RESULT informer-bytes-per-object kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=client-go\n", bytesK, bytesP, bytesK/bytesP)
	fmt.Printf("RESULT informer-metadata-bytes-per-object kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=client-go\n", bytesM, bytesP, bytesM/bytesP)
	fmt.Printf("RESULT informer-event-latency-p99 kloop=%.2f peer=%.2f ratio=%.2f unit=ms peer_name=client-go\n", p(latK, .99), p(latP, .99), p(latK, .99)/p(latP, .99))
	fmt.Printf("# medians of %d rounds; kloop-metadata sync %.3fs; whole run %.0fs\n", rounds, syncM, time.Since(began).Seconds())
	return nil
}

// seed creates n ConfigMaps with a few concurrent writers.
func seed(ctx context.Context, kc kubernetes.Interface, n int) error {
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, seedWriters)
	for w := range seedWriters {
		wg.Go(func() {
			buf := make([]byte, 256)
			for i := w; i < n; i += seedWriters {
				if _, err := rand.Read(buf); err != nil {
					errs <- err
					return
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

// side starts one informer with one no-op handler. It returns the
// informer's synced channel, the channel that closes once the handler has
// been given the initial list, something to keep alive while memory is
// measured, and a function that stops the informer and waits for it.
type side struct {
	name  string
	start func(cfg *rest.Config) (synced, handled <-chan struct{}, live any, stop func(), err error)
}

type measurement struct {
	sync time.Duration
	heap int64
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
	cpuProfile, memProfile string
	noSharing              bool
)

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
		Watch:      watcher.Config{InitialList: watcher.InitialListMode(kloopList)},
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
	began := time.Now()
	synced, handled, live, stop, err := s.start(cfg)
	if err != nil {
		return measurement{}, err
	}
	select {
	case <-synced:
	case <-time.After(5 * time.Minute):
		stop()
		return measurement{}, fmt.Errorf("not synced after 5 minutes")
	}
	took := time.Since(began)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	// Memory is what stays once the handler, too, has been through the
	// initial list: a queue still draining is not retained memory.
	select {
	case <-handled:
	case <-time.After(5 * time.Minute):
		stop()
		return measurement{}, fmt.Errorf("handler not synced after 5 minutes")
	}
	after := heapAlloc()
	if memProfile != "" {
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
	runtime.KeepAlive(live)
	stop()
	return measurement{sync: took, heap: int64(after) - int64(before)}, nil
}

func runKloop(cfg *rest.Config) (<-chan struct{}, <-chan struct{}, any, func(), error) {
	f := informer.NewFactory(cfg, kloopOptions())
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: namespace})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	reg, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{}, informer.HandlerOptions{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stop := startFactory(f)
	return inf.Synced(), reg.Synced(), inf, stop, nil
}

func runKloopMetadata(cfg *rest.Config) (<-chan struct{}, <-chan struct{}, any, func(), error) {
	f := informer.NewFactory(cfg, kloopOptions())
	inf, err := informer.OfMetadata(f, corev1.SchemeGroupVersion.WithResource("configmaps"), informer.Scope{Namespace: namespace})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	reg, err := inf.AddHandler(informer.HandlerFuncs[*metav1.PartialObjectMetadata]{}, informer.HandlerOptions{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stop := startFactory(f)
	return inf.Synced(), reg.Synced(), inf, stop, nil
}

func startFactory(f *informer.Factory) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "kloop factory:", err)
		}
	}()
	return func() { cancel(); <-done }
}

func runClientGo(cfg *rest.Config) (<-chan struct{}, <-chan struct{}, any, func(), error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().ConfigMaps().Informer()
	reg, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.StartWithContext(ctx)
	return inf.HasSyncedChecker().Done(), reg.HasSyncedChecker().Done(), inf, func() { cancel(); f.Shutdown() }, nil
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
	if _, err := kinf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		UpdateFunc: func(_, cm *corev1.ConfigMap) { observe(kr, cm.Annotations) },
	}, informer.HandlerOptions{}); err != nil {
		return nil, nil, err
	}
	pf := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(namespace))
	pinf := pf.Core().V1().ConfigMaps().Informer()
	if _, err := pinf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { observe(pr, obj.(*corev1.ConfigMap).Annotations) },
	}); err != nil {
		return nil, nil, err
	}
	stopK := startFactory(kf)
	defer stopK()
	pctx, pcancel := context.WithCancel(ctx)
	pf.StartWithContext(pctx)
	defer func() { pcancel(); pf.Shutdown() }()
	<-kinf.Synced()
	<-pinf.HasSyncedChecker().Done()

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
