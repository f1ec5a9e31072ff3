// Command workqueue compares kloop's workqueue with client-go's rate-limiting
// workqueue and controller-runtime's priority queue on one fixed workload, in
// one process:
//
//	4 producers, 8 workers, 10,000 distinct keys, 2,000,000 adds in all;
//	every key handed out is Done at once. The priority variant gives every add
//	a random priority in [-100, 100].
//
// Each producer replays a pre-generated sequence of key indexes (and
// priorities), the same for every queue. Every queue first serves a warm-up
// pass of 200,000 adds, then, on the same queue, the measured pass; a pass
// ends when the producers are finished and the queue is empty with nothing in
// flight. An item is one Add: throughput is adds per second of the measured
// pass, and allocations per item are runtime.MemStats.Mallocs over the
// measured passes divided by their adds (keys handed out, fewer than adds
// thanks to de-duplication, are printed too, per hand-out as well).
//
// Each comparison runs in rounds; a round runs kloop and its peer back to
// back (alternating which goes first), each on a fresh queue, so that both
// see the same machine load. The RESULT line reports the round whose
// kloop/peer ratio is the median of all rounds (-rounds, default 7).
//
// Run with: cd bench && go run ./cmd/workqueue
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	cgworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/kloop-dev/kloop/workqueue"
)

const (
	producers = 4
	workers   = 8
	keyCount  = 10_000
	totalAdds = 2_000_000
)

// subject is one queue under test. Every method is called through this
// interface for every queue, so dispatch costs the same on both sides.
type subject interface {
	add(key string, prio *int)
	get() (string, bool)
	done(key string)
	len() int
	shutDown()
}

type kloopQueue struct{ q *workqueue.Queue[string] }

func (k kloopQueue) add(key string, prio *int) {
	if prio == nil {
		k.q.Add(key)
	} else {
		k.q.AddWithPriority(key, *prio)
	}
}

func (k kloopQueue) get() (string, bool) {
	key, err := k.q.Get(context.Background())
	return key, err == nil
}
func (k kloopQueue) done(key string) { k.q.Done(key) }
func (k kloopQueue) len() int        { return k.q.Status().Ready }
func (k kloopQueue) shutDown()       { k.q.ShutDown() }

type clientGoQueue struct {
	q cgworkqueue.TypedRateLimitingInterface[string]
}

func (c clientGoQueue) add(key string, _ *int) { c.q.Add(key) }
func (c clientGoQueue) get() (string, bool) {
	key, shutdown := c.q.Get()
	return key, !shutdown
}
func (c clientGoQueue) done(key string) { c.q.Done(key) }
func (c clientGoQueue) len() int        { return c.q.Len() }
func (c clientGoQueue) shutDown()       { c.q.ShutDown() }

type crQueue struct {
	q priorityqueue.PriorityQueue[string]
}

func (c crQueue) add(key string, prio *int) {
	c.q.AddWithOpts(priorityqueue.AddOpts{Priority: prio}, key)
}

func (c crQueue) get() (string, bool) {
	key, shutdown := c.q.Get()
	return key, !shutdown
}
func (c crQueue) done(key string) { c.q.Done(key) }
func (c crQueue) len() int        { return c.q.Len() }
func (c crQueue) shutDown()       { c.q.ShutDown() }

// workload is the pre-generated input every queue replays.
type workload struct {
	keys  []string
	seq   [producers][]int32 // key indexes per producer
	prios [producers][]int   // priorities per producer; nil without priorities
}

func newWorkload(adds int, withPrio bool, seed uint64) *workload {
	w := &workload{keys: make([]string, keyCount)}
	for i := range w.keys {
		w.keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%50, i)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for p := range producers {
		n := adds / producers
		w.seq[p] = make([]int32, n)
		for i := range n {
			w.seq[p][i] = int32(r.IntN(keyCount))
		}
		if withPrio {
			w.prios[p] = make([]int, n)
			for i := range n {
				w.prios[p][i] = r.IntN(201) - 100
			}
		}
	}
	return w
}

type result struct {
	elapsed   time.Duration
	produced  time.Duration // until the producers were done
	adds      int
	processed int64
	mallocs   uint64
}

func (r result) throughput() float64 { return float64(r.adds) / r.elapsed.Seconds() }

// run drives one queue through the warm-up workload and then, measured, the
// workload itself, and shuts it down. The same queue serves both passes, so
// the measured pass sees a queue in steady state (maps and buffers grown),
// which is what a long-running controller sees.
func run(s subject, warm, w *workload) result {
	var processed, inFlight atomic.Int64
	var wg sync.WaitGroup
	startWorkers := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-startWorkers
			for {
				key, ok := s.get()
				if !ok {
					return
				}
				inFlight.Add(1)
				s.done(key)
				inFlight.Add(-1)
				processed.Add(1)
			}
		})
	}
	close(startWorkers)

	// Producers are started once and run one pass per phase, so the
	// measured pass creates no goroutines.
	phases := []*workload{warm, w}
	starts := make([]chan struct{}, len(phases))
	for i := range starts {
		starts[i] = make(chan struct{})
	}
	var pass sync.WaitGroup
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Go(func() {
			for i, ph := range phases {
				<-starts[i]
				seq, prios, keys := ph.seq[p], ph.prios[p], ph.keys
				for j, k := range seq {
					if prios != nil {
						s.add(keys[k], &prios[j])
					} else {
						s.add(keys[k], nil)
					}
				}
				pass.Done()
			}
		})
	}
	// drain waits until nothing is ready and nothing is in flight, seen
	// twice in a row. controller-runtime's ShutDown drops ready items, so the
	// end of a pass is detected this way for every queue.
	drain := func() {
		for quiet := 0; quiet < 2; {
			if s.len() == 0 && inFlight.Load() == 0 {
				quiet++
			} else {
				quiet = 0
			}
			time.Sleep(50 * time.Microsecond)
		}
	}

	pass.Add(producers)
	close(starts[0])
	pass.Wait()
	drain()
	before := processed.Load()

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	pass.Add(producers)
	close(starts[1])
	pass.Wait()
	produced := time.Since(t0)
	drain()
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)

	s.shutDown()
	wg.Wait()
	pwg.Wait()

	adds := 0
	for p := range producers {
		adds += len(w.seq[p])
	}
	return result{elapsed: elapsed, produced: produced, adds: adds, processed: processed.Load() - before, mallocs: m1.Mallocs - m0.Mallocs}
}

type contender struct {
	name string
	make func() subject
}

func printRun(name string, r result) {
	fmt.Printf("  %-20s %6.0f ms (adds done at %4.0f) %10.0f adds/s %8d handed out %7d allocs (%.6f/add, %.6f/hand-out)\n",
		name, float64(r.elapsed.Microseconds())/1000, float64(r.produced.Microseconds())/1000, r.throughput(), r.processed,
		r.mallocs, float64(r.mallocs)/float64(r.adds), float64(r.mallocs)/float64(r.processed))
}

// pairing is the outcome of a comparison: the round whose throughput ratio
// is the median of all rounds, and allocations summed over all rounds.
type pairing struct {
	kloop, peer             result
	kloopAllocs, peerAllocs float64 // per add, over all rounds
}

// compare runs kloop and its peer in pairs, one right after the other (the
// order alternating between rounds), so that each round's ratio compares the
// two under the same machine load. On a shared machine absolute times drift
// by a factor of several; the median of the per-round ratios is the figure
// that holds still.
func compare(rounds int, w, warm *workload, kloop, peer contender) pairing {
	type round struct{ k, p result }
	rs := make([]round, rounds)
	var km, pm uint64
	var adds int
	for i := range rs {
		if i%2 == 0 {
			rs[i].k = run(kloop.make(), warm, w)
			rs[i].p = run(peer.make(), warm, w)
		} else {
			rs[i].p = run(peer.make(), warm, w)
			rs[i].k = run(kloop.make(), warm, w)
		}
		printRun(kloop.name, rs[i].k)
		printRun(peer.name, rs[i].p)
		fmt.Printf("  %-20s %.2f\n", "round ratio", rs[i].k.throughput()/rs[i].p.throughput())
		km += rs[i].k.mallocs
		pm += rs[i].p.mallocs
		adds += rs[i].k.adds
	}
	slices.SortFunc(rs, func(a, b round) int {
		return cmp.Compare(a.k.throughput()/a.p.throughput(), b.k.throughput()/b.p.throughput())
	})
	med := rs[len(rs)/2]
	return pairing{med.k, med.p, float64(km) / float64(adds), float64(pm) / float64(adds)}
}

func main() {
	rounds := flag.Int("rounds", 7, "measured rounds per comparison (the median round counts)")
	only := flag.String("only", "", "profiling aid: run only the contender with this name, print no RESULT")
	onlyPrio := flag.Bool("only-priority", false, "with -only: use the priority workload")
	memProfile := flag.String("memprofile", "", "with -only: record every allocation and write a heap profile to this file")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "rounds must be at least 1")
		os.Exit(2)
	}
	fmt.Printf("workqueue benchmark: %d producers, %d workers, %d keys, %d adds, GOMAXPROCS=%d\n",
		producers, workers, keyCount, totalAdds, runtime.GOMAXPROCS(0))

	if *only != "" {
		cs := map[string]func() subject{
			"kloop": func() subject { return kloopQueue{workqueue.New(workqueue.Options[string]{})} },
			"client-go": func() subject {
				return clientGoQueue{cgworkqueue.NewTypedRateLimitingQueue(cgworkqueue.DefaultTypedControllerRateLimiter[string]())}
			},
			"controller-runtime": func() subject { return crQueue{priorityqueue.New[string]("")} },
		}
		mk, ok := cs[*only]
		if !ok {
			fmt.Fprintln(os.Stderr, "unknown contender", *only)
			os.Exit(2)
		}
		w, warm := newWorkload(totalAdds, *onlyPrio, 1), newWorkload(totalAdds/10, *onlyPrio, 2)
		if *memProfile != "" {
			runtime.MemProfileRate = 1
		}
		for range *rounds {
			printRun(*only, run(mk(), warm, w))
		}
		if *memProfile != "" {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		return
	}
	plain := newWorkload(totalAdds, false, 1)
	plainWarm := newWorkload(totalAdds/10, false, 2)
	wq := compare(*rounds, plain, plainWarm,
		contender{"kloop", func() subject {
			return kloopQueue{workqueue.New(workqueue.Options[string]{})}
		}},
		contender{"client-go", func() subject {
			return clientGoQueue{cgworkqueue.NewTypedRateLimitingQueueWithConfig(
				cgworkqueue.DefaultTypedControllerRateLimiter[string](),
				cgworkqueue.TypedRateLimitingQueueConfig[string]{})}
		}},
	)

	prio := newWorkload(totalAdds, true, 3)
	prioWarm := newWorkload(totalAdds/10, true, 4)
	pq := compare(*rounds, prio, prioWarm,
		contender{"kloop-priority", func() subject {
			return kloopQueue{workqueue.New(workqueue.Options[string]{})}
		}},
		contender{"controller-runtime", func() subject {
			return crQueue{priorityqueue.New[string]("")}
		}},
	)

	fmt.Printf("RESULT workqueue-throughput kloop=%.0f peer=%.0f ratio=%.2f unit=items/s peer_name=client-go\n",
		wq.kloop.throughput(), wq.peer.throughput(), wq.kloop.throughput()/wq.peer.throughput())
	fmt.Printf("RESULT priorityqueue-throughput kloop=%.0f peer=%.0f ratio=%.2f unit=items/s peer_name=controller-runtime\n",
		pq.kloop.throughput(), pq.peer.throughput(), pq.kloop.throughput()/pq.peer.throughput())
	ratio := 0.0
	if wq.peerAllocs > 0 {
		ratio = wq.kloopAllocs / wq.peerAllocs
	}
	fmt.Printf("RESULT workqueue-allocs-per-item kloop=%.6f peer=%.6f ratio=%.2f unit=allocs peer_name=client-go\n",
		wq.kloopAllocs, wq.peerAllocs, ratio)
}
