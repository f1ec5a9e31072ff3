package main

// The peak: what a container limit sees while an informer makes its first
// sync. Each peak side runs in a child process of its own (this binary
// re-executed with -child), so that no side inherits another's heap, and
// reports its peak RSS, its RSS after GC and its Go heap during and after
// the sync. See the package comment.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	cgcache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kloop-dev/kloop/bench/internal/childproc"
	kcache "github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// peakSides are the sides measured in child processes, in the order of
// their first round. Each is a library's informer for the workload's type
// in one namespace, with one no-op handler where the library has handlers.
var peakSides = []string{
	"kloop", "kloop-encoded", "kloop-metadata", "kloop-transform",
	"client-go", "client-go-lean",
	"cr", "cr-lean", "cr-metadata",
}

// peakReport is what a child measured.
type peakReport struct {
	BaseRSS    int64 `json:"baseRSS"`    // VmRSS before the informer started
	PeakRSS    int64 `json:"peakRSS"`    // VmHWM once synced: the process's high-water mark
	RSSAfterGC int64 `json:"rssAfterGC"` // VmRSS after two forced GCs, informer running
	RSSFreed   int64 `json:"rssFreed"`   // VmRSS after debug.FreeOSMemory
	PeakLive   int64 `json:"peakLive"`   // largest live heap a GC saw during the sync
	PeakHeap   int64 `json:"peakHeap"`   // largest heap in use (live and not yet swept) sampled during the sync
	Retained   int64 `json:"retained"`   // HeapAlloc after GC, synced, minus before the informer
	CacheBytes int64 `json:"cacheBytes"` // kloop's own estimate of its cache, where it has one
	Sync       int64 `json:"syncNanos"`
	Allocated  int64 `json:"allocated"`  // bytes allocated from start to synced (TotalAlloc)
	Lists      int64 `json:"lists"`      // plain LIST requests (a streaming side makes none)
	WatchLists int64 `json:"watchLists"` // watch requests with sendInitialEvents
	GetNanos   int64 `json:"getNanos"`   // one cached Get, median of 5 batches (0: not timed)
	ListNanos  int64 `json:"listNanos"`  // one List of every cached object, median of 3
}

// procStatus reads one "Vm..." figure, in bytes, from /proc/self/status.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// requestCounter counts the list and streaming-list requests a side makes.
type requestCounter struct {
	rt                http.RoundTripper
	lists, watchLists *atomic.Int64
}

func (c requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		c.watchLists.Add(1)
	case q.Get("watch") != "true" && r.Method == http.MethodGet && (strings.HasSuffix(r.URL.Path, "/configmaps") || strings.HasSuffix(r.URL.Path, "/pods")):
		c.lists.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// runPeakChild is the child: it starts side's informer on workload,
// waits until it and its handler are synced, measures, prints one line
// "PEAK <json>" and exits.
func runPeakChild(side, kubeconfig, workload string, n int, profile string) error {
	crlog.SetLogger(logr.Discard())
	if profile != "" {
		runtime.MemProfileRate = 512 // the allocation profile sees the garbage of each object
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	var lists, watchLists atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return requestCounter{rt: rt, lists: &lists, watchLists: &watchLists}
	})
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before, allocBefore := ms.HeapAlloc, ms.TotalAlloc
	rep := peakReport{BaseRSS: procStatus("VmRSS")}

	sampler := startHeapSampler(profile != "")
	began := time.Now()
	r, err := startPeakSide(cfg, side, workload)
	if err != nil {
		return err
	}
	for _, c := range []<-chan struct{}{r.synced, r.handled} {
		select {
		case <-c:
		case <-time.After(10 * time.Minute):
			return fmt.Errorf("%s not synced after 10 minutes", side)
		}
	}
	rep.Sync = int64(time.Since(began))
	rep.PeakRSS = procStatus("VmHWM")
	if os.Getenv("PEAK_CLASSES") != "" {
		var parts []string
		for _, d := range metrics.All() {
			if strings.HasPrefix(d.Name, "/memory/classes/") && d.Kind == metrics.KindUint64 {
				sm := []metrics.Sample{{Name: d.Name}}
				metrics.Read(sm)
				parts = append(parts, fmt.Sprintf("%s=%.1f", strings.TrimPrefix(d.Name, "/memory/classes/"), mib(int64(sm[0].Value.Uint64()))))
			}
		}
		fmt.Fprintln(os.Stderr, strings.Join(parts, " "))
	}
	rep.PeakLive, rep.PeakHeap = sampler.stop()
	runtime.ReadMemStats(&ms)
	rep.Allocated = int64(ms.TotalAlloc - allocBefore)
	if profile != "" {
		f, err := os.Create(profile + ".allocs")
		if err != nil {
			return err
		}
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return err
		}
	}
	if profile != "" && sampler.profile.Len() > 0 {
		if err := os.WriteFile(profile, sampler.profile.Bytes(), 0o644); err != nil {
			return err
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	rep.Retained = int64(ms.HeapAlloc) - int64(before)
	rep.RSSAfterGC = procStatus("VmRSS")
	debug.FreeOSMemory()
	rep.RSSFreed = procStatus("VmRSS")
	if r.cacheBytes != nil {
		rep.CacheBytes = r.cacheBytes()
	}
	rep.Lists, rep.WatchLists = lists.Load(), watchLists.Load()
	if got := r.count(); got != n {
		return fmt.Errorf("%s cached %d objects, want %d", side, got, n)
	}
	if r.get != nil {
		// Reads come after every memory figure, so they do not change them.
		get, _, list, err := timeReads(r.get, r.list, r.names(), n)
		if err != nil {
			return fmt.Errorf("%s: %w", side, err)
		}
		rep.GetNanos, rep.ListNanos = int64(get), int64(list)
	}
	runtime.KeepAlive(r.live)
	b, _ := json.Marshal(rep)
	fmt.Printf("PEAK %s\n", b)
	return r.stop()
}

// heapSampler follows the heap during a sync: the largest live heap any
// GC saw, the largest heap in use at any sample and, when asked, a heap
// profile taken at the GC that saw the largest live heap (the profile
// reflects the latest GC, so that is the high-water mark's content).
type heapSampler struct {
	done             chan struct{}
	wg               sync.WaitGroup
	peakLive, inUse  uint64
	withProfile      bool
	profile          bytes.Buffer
	lastCycle        uint64
	samples          []metrics.Sample
	liveAt, objectsA int
}

func startHeapSampler(withProfile bool) *heapSampler {
	s := &heapSampler{done: make(chan struct{}), withProfile: withProfile, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}}
	s.wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *heapSampler) sample() {
	metrics.Read(s.samples)
	live, objects, cycles := s.samples[0].Value.Uint64(), s.samples[1].Value.Uint64(), s.samples[2].Value.Uint64()
	s.inUse = max(s.inUse, objects)
	if cycles != s.lastCycle {
		s.lastCycle = cycles
		if live > s.peakLive {
			s.peakLive = live
			if s.withProfile {
				s.profile.Reset()
				_ = pprof.Lookup("heap").WriteTo(&s.profile, 0)
			}
		}
	}
}

func (s *heapSampler) stop() (peakLive, inUse int64) {
	close(s.done)
	s.wg.Wait()
	s.sample()
	return int64(s.peakLive), int64(s.inUse)
}

// peakRunning is a started peak side.
type peakRunning struct {
	synced, handled <-chan struct{}
	live            any
	stop            func() error
	count           func() int
	cacheBytes      func() int64
	// get reads one cached object by name and list all of them (read-only
	// where the side allows: controller-runtime's without its deep copy);
	// names lists the cached objects' names, to pick the gets from.
	get   func(name string) bool
	list  func() int
	names func() []string
}

// stripManagedFields is the lean option client-go and controller-runtime
// document: a transform that drops metadata.managedFields before an
// object is stored.
func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

func startPeakSide(cfg *rest.Config, side, workload string) (*peakRunning, error) {
	pods := workload == "pods"
	switch side {
	case "kloop", "kloop-encoded", "kloop-transform":
		opts := kloopOptions()
		opts.Memory.Encoded = side == "kloop-encoded"
		f := informer.NewFactory(cfg, opts)
		if pods {
			inf, err := informer.Of[*corev1.Pod](f, informer.Scope{Namespace: namespace})
			if err != nil {
				return nil, err
			}
			if side == "kloop-transform" {
				if err := inf.SetTransform(leanPod); err != nil {
					return nil, err
				}
			}
			return kloopRunning(f, inf)
		}
		inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: namespace})
		if err != nil {
			return nil, err
		}
		if side == "kloop-transform" {
			if err := inf.SetTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap {
				for k := range cm.Data {
					cm.Data[k] = ""
				}
				return cm
			}); err != nil {
				return nil, err
			}
		}
		return kloopRunning(f, inf)
	case "kloop-metadata":
		f := informer.NewFactory(cfg, kloopOptions())
		inf, err := informer.OfResource[*metav1.PartialObjectMetadata](f, corev1.SchemeGroupVersion.WithResource(resourceOf(workload)), informer.Scope{Namespace: namespace})
		if err != nil {
			return nil, err
		}
		return kloopRunning(f, inf)
	case "client-go", "client-go-lean":
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		opts := []informers.SharedInformerOption{informers.WithNamespace(namespace)}
		if side == "client-go-lean" {
			opts = append(opts, informers.WithTransform(stripManagedFields))
		}
		f := informers.NewSharedInformerFactoryWithOptions(kc, 0, opts...)
		var inf cgcache.SharedIndexInformer
		if pods {
			inf = f.Core().V1().Pods().Informer()
		} else {
			inf = f.Core().V1().ConfigMaps().Informer()
		}
		reg, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		f.StartWithContext(ctx)
		idx := inf.GetIndexer()
		return &peakRunning{
			synced: inf.HasSyncedChecker().Done(), handled: reg.HasSyncedChecker().Done(), live: inf,
			stop:  func() error { cancel(); f.Shutdown(); return nil },
			count: func() int { return len(inf.GetStore().ListKeys()) },
			// What a generated lister does: the indexer's Get by key, and
			// its namespace index for the namespace's objects.
			get: func(name string) bool {
				_, ok, err := idx.GetByKey(namespace + "/" + name)
				return ok && err == nil
			},
			list: func() int {
				l, _ := idx.ByIndex(cgcache.NamespaceIndex, namespace)
				return len(l)
			},
			names: func() []string {
				var names []string
				for _, k := range idx.ListKeys() {
					_, name, _ := cgcache.SplitMetaNamespaceKey(k)
					names = append(names, name)
				}
				return names
			},
		}, nil
	case "cr", "cr-lean", "cr-metadata":
		opts := crcache.Options{
			Scheme:            clientgoscheme.Scheme,
			DefaultNamespaces: map[string]crcache.Config{namespace: {}},
		}
		if side == "cr-lean" || side == "cr-metadata" {
			opts.DefaultTransform = crcache.TransformStripManagedFields()
		}
		c, err := crcache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		var obj crclient.Object
		switch {
		case side == "cr-metadata":
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(workload)))
			obj = m
		case pods:
			obj = &corev1.Pod{}
		default:
			obj = &corev1.ConfigMap{}
		}
		ctx, cancel := context.WithCancel(context.Background())
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			cancel()
			return nil, err
		}
		reg, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{})
		if err != nil {
			cancel()
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		synced := make(chan struct{})
		go func() {
			if c.WaitForCacheSync(ctx) {
				close(synced)
			}
		}()
		newObj := func() crclient.Object {
			switch {
			case side == "cr-metadata":
				m := &metav1.PartialObjectMetadata{}
				m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(workload)))
				return m
			case pods:
				return &corev1.Pod{}
			}
			return &corev1.ConfigMap{}
		}
		return &peakRunning{
			synced: synced, handled: reg.HasSyncedChecker().Done(), live: c,
			stop: func() error { cancel(); return <-done },
			// Reads as its users make them: a Get is a deep copy, and so is
			// a List without UnsafeDisableDeepCopy.
			get: func(name string) bool {
				return c.Get(ctx, crclient.ObjectKey{Namespace: namespace, Name: name}, newObj()) == nil
			},
			list: func() int {
				if pods && side != "cr-metadata" {
					var pl corev1.PodList
					_ = c.List(ctx, &pl, crclient.InNamespace(namespace))
					return len(pl.Items)
				}
				if side == "cr-metadata" {
					var l metav1.PartialObjectMetadataList
					l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(workload) + "List"))
					_ = c.List(ctx, &l, crclient.InNamespace(namespace))
					return len(l.Items)
				}
				var cl corev1.ConfigMapList
				_ = c.List(ctx, &cl, crclient.InNamespace(namespace))
				return len(cl.Items)
			},
			names: func() []string {
				var l metav1.PartialObjectMetadataList
				l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(workload) + "List"))
				var names []string
				if side == "cr-metadata" {
					_ = c.List(ctx, &l, crclient.UnsafeDisableDeepCopy)
					for _, o := range l.Items {
						names = append(names, o.Name)
					}
					return names
				}
				if pods {
					var pl corev1.PodList
					_ = c.List(ctx, &pl, crclient.UnsafeDisableDeepCopy)
					for _, o := range pl.Items {
						names = append(names, o.Name)
					}
					return names
				}
				var cl corev1.ConfigMapList
				_ = c.List(ctx, &cl, crclient.UnsafeDisableDeepCopy)
				for _, o := range cl.Items {
					names = append(names, o.Name)
				}
				return names
			},
			count: func() int {
				var l metav1.PartialObjectMetadataList
				l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(workload) + "List"))
				if side != "cr-metadata" {
					if pods {
						var pl corev1.PodList
						_ = c.List(ctx, &pl, crclient.UnsafeDisableDeepCopy)
						return len(pl.Items)
					}
					var cl corev1.ConfigMapList
					_ = c.List(ctx, &cl, crclient.UnsafeDisableDeepCopy)
					return len(cl.Items)
				}
				_ = c.List(ctx, &l, crclient.UnsafeDisableDeepCopy)
				return len(l.Items)
			},
		}, nil
	}
	return nil, fmt.Errorf("unknown peak side %q (have %s)", side, strings.Join(peakSides, ","))
}

// kloopInformer is what the peak needs of any kloop informer.
type kloopInformer[T watcher.Object] interface {
	AddHandler(informer.Handler[T], informer.HandlerOptions) (*informer.Registration, error)
	Synced() <-chan struct{}
	Status() informer.Status
	Lister() kcache.Lister[T]
}

func kloopRunning[T watcher.Object](f *informer.Factory, inf kloopInformer[T]) (*peakRunning, error) {
	reg, err := inf.AddHandler(informer.HandlerFuncs[T]{}, informer.HandlerOptions{})
	if err != nil {
		return nil, err
	}
	lister := inf.Lister()
	return &peakRunning{
		synced: inf.Synced(), handled: reg.Synced(), live: inf, stop: startFactory(f),
		count:      func() int { return inf.Status().Objects },
		cacheBytes: func() int64 { return inf.Status().CacheBytes },
		get: func(name string) bool {
			_, ok := lister.Get(namespace, name)
			return ok
		},
		list: func() int { return len(lister.ListInNamespace(namespace, nil)) },
		names: func() []string {
			var names []string
			for _, o := range lister.ListInNamespace(namespace, nil) {
				names = append(names, o.GetName())
			}
			return names
		},
	}, nil
}

// leanPod is kloop's transform side for Pods: what a controller that
// watches pods' phase, conditions, owners and labels reads; the
// containers' env and the volumes go.
func leanPod(p *corev1.Pod) *corev1.Pod {
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Env = nil
	}
	p.Spec.Volumes = nil
	return p
}

func resourceOf(workload string) string {
	if workload == "pods" {
		return "pods"
	}
	return "configmaps"
}

func kindOf(workload string) string {
	if workload == "pods" {
		return "Pod"
	}
	return "ConfigMap"
}

// peakRound runs one child for side and returns its report.
func peakRound(kubeconfig, side, workload string, n int, profile string) (peakReport, error) {
	args := []string{"-child", side, "-kubeconfig", kubeconfig, "-workload", workload, "-n", strconv.Itoa(n)}
	if profile != "" {
		args = append(args, "-memprofile", profile)
	}
	c, err := childproc.Start(args...)
	if err != nil {
		return peakReport{}, err
	}
	defer c.Close()
	line, err := c.Expect("PEAK")
	if err != nil {
		return peakReport{}, err
	}
	var rep peakReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return peakReport{}, fmt.Errorf("child said %q: %w", line, err)
	}
	return rep, nil
}

// measurePeaks runs every chosen peak side rounds times, in a rotating
// order, and prints each round and the RESULT lines.
func measurePeaks(kubeconfig, workload string, sides []string, n, rounds int, suffix string) error {
	results := map[string][]peakReport{}
	for r := range rounds {
		for i := range sides {
			s := sides[(i+r)%len(sides)]
			prof := ""
			if memProfile != "" {
				prof = fmt.Sprintf("%s.peak-%s-%s-%d", memProfile, workload, s, n)
			}
			rep, err := peakRound(kubeconfig, s, workload, n, prof)
			if err != nil {
				return fmt.Errorf("peak N=%d round %d, %s: %w", n, r+1, s, err)
			}
			fmt.Printf("  N=%-6d round %d %-15s peak RSS %6.1f MiB (base %5.1f)  after GC %6.1f  freed %6.1f  peak live heap %6.1f  peak heap %6.1f  retained %6.1f MiB  sync %6.3fs  lists %d watch-lists %d%s  get %d ns  list %.2f ms\n",
				n, r+1, s, mib(rep.PeakRSS), mib(rep.BaseRSS), mib(rep.RSSAfterGC), mib(rep.RSSFreed), mib(rep.PeakLive), mib(rep.PeakHeap), mib(rep.Retained),
				time.Duration(rep.Sync).Seconds(), rep.Lists, rep.WatchLists, cacheNote(rep), rep.GetNanos, float64(rep.ListNanos)/1e6)
			results[s] = append(results[s], rep)
		}
	}
	med := func(side string, f func(peakReport) int64) float64 {
		v := make([]measurement, 0, len(results[side]))
		for _, r := range results[side] {
			v = append(v, measurement{heap: f(r)})
		}
		return median(v, func(m measurement) float64 { return float64(m.heap) })
	}
	peak := func(r peakReport) int64 { return r.PeakRSS }
	have := func(names ...string) bool {
		for _, name := range names {
			if len(results[name]) == 0 {
				return false
			}
		}
		return true
	}
	w := ""
	if workload == "pods" {
		w = "-pods"
	}
	pair := func(figure, k, p, peerName string) {
		if have(k, p) {
			kv, pv := med(k, peak), med(p, peak)
			fmt.Printf("RESULT %s%s%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=%s\n", figure, w, suffix, kv, pv, kv/pv, peerName)
		}
	}
	pair("informer-peak-rss-bytes", "kloop", "client-go", "client-go")
	pair("informer-peak-rss-bytes-cr", "kloop", "cr", "controller-runtime")
	pair("informer-peak-rss-bytes-encoded", "kloop-encoded", "client-go-lean", "client-go")
	pair("informer-peak-rss-bytes-encoded-cr", "kloop-encoded", "cr-lean", "controller-runtime")
	pair("informer-peak-rss-bytes-metadata-cr", "kloop-metadata", "cr-metadata", "controller-runtime")
	pair("informer-peak-rss-bytes-encoded-vs-default", "kloop-encoded", "kloop", "kloop")
	retained := func(r peakReport) int64 { return r.Retained }
	retainedPair := func(figure, k, p, peerName string) {
		if have(k, p) {
			kv, pv := med(k, retained), med(p, retained)
			fmt.Printf("RESULT %s%s%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=%s\n", figure, w, suffix, kv, pv, kv/pv, peerName)
		}
	}
	retainedPair("informer-retained-bytes", "kloop", "client-go", "client-go")
	retainedPair("informer-retained-bytes-cr", "kloop", "cr", "controller-runtime")
	retainedPair("informer-retained-bytes-encoded", "kloop-encoded", "client-go-lean", "client-go")
	if have("kloop") && med("kloop", func(r peakReport) int64 { return r.CacheBytes }) > 0 {
		est, heap := med("kloop", func(r peakReport) int64 { return r.CacheBytes }), med("kloop", func(r peakReport) int64 { return r.Retained })
		fmt.Printf("RESULT informer-cache-bytes-estimate%s%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=retained-heap\n", w, suffix, est, heap, est/heap)
	}
	readPair := func(figure, k, p, peerName string, f func(peakReport) int64, scale float64, unit string) {
		if have(k, p) && med(k, f) > 0 && med(p, f) > 0 {
			kv, pv := med(k, f)/scale, med(p, f)/scale
			fmt.Printf("RESULT %s%s%s kloop=%.2f peer=%.2f ratio=%.2f unit=%s peer_name=%s\n", figure, w, suffix, kv, pv, kv/pv, unit, peerName)
		}
	}
	getNs := func(r peakReport) int64 { return r.GetNanos }
	listNs := func(r peakReport) int64 { return r.ListNanos }
	readPair("informer-get-ns", "kloop", "client-go", "client-go", getNs, 1, "ns")
	readPair("informer-list-ms", "kloop", "client-go", "client-go", listNs, 1e6, "ms")
	readPair("informer-get-ns-cr", "kloop", "cr", "controller-runtime", getNs, 1, "ns")
	readPair("informer-list-ms-cr", "kloop", "cr", "controller-runtime", listNs, 1e6, "ms")
	fmt.Printf("# peak medians (MiB): side peakRSS rssAfterGC rssFreed peakLiveHeap retainedHeap\n")
	for _, s := range sides {
		if have(s) {
			fmt.Printf("#   %-15s %6.1f %6.1f %6.1f %6.1f %6.1f\n", s,
				med(s, peak)/(1<<20), med(s, func(r peakReport) int64 { return r.RSSAfterGC })/(1<<20),
				med(s, func(r peakReport) int64 { return r.RSSFreed })/(1<<20),
				med(s, func(r peakReport) int64 { return r.PeakLive })/(1<<20),
				med(s, func(r peakReport) int64 { return r.Retained })/(1<<20))
		}
	}
	return nil
}

func cacheNote(r peakReport) string {
	if r.CacheBytes == 0 {
		return ""
	}
	return fmt.Sprintf("  cache estimate %.1f MiB", mib(r.CacheBytes))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
