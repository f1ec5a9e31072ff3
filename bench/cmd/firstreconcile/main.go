// Command firstreconcile measures what the honest-reads rule costs at a
// controller's start: the time from starting a controller program to its
// first reconcile, and what that reconcile reads, on a workload where the
// reconcile reads a kind that is not its source:
//
//	N ConfigMaps (default 20,000) and one Secret in a namespace of a real
//	API server (package testenv). The controller is For the Secrets; its
//	reconcile lists the ConfigMaps, which it reads through a handle (an
//	informer) that is not one of its sources.
//
// Three sides, each a fresh program per round, in one process:
//
//   - kloop: an App as it is (a controller starts once every informer of
//     the App has synced; a read of a handle waits for its own informer).
//   - kloop-unguarded: the same App with the controller told to wait only
//     for its sources (controller.Options.WaitForSync a no-op) and reading
//     the raw Lister: how kloop behaved before, when the first reconcile
//     read an empty cache.
//   - client-go: sample-controller's way, a SharedInformerFactory with both
//     informers, WaitForCacheSync of both, then a worker.
//
// Figures per side (medians of R rounds, sides rotating): start to first
// reconcile, how many ConfigMaps that reconcile saw, and the ConfigMaps
// informer's own sync time (start to synced) for kloop. The RESULT lines
// compare kloop with client-go, and kloop's start-to-first-reconcile with
// its ConfigMaps informer's sync (the wait must cost no more than the sync).
//
// Run with: cd bench && go run ./cmd/firstreconcile [-n 20000] [-rounds 5]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
)

func main() {
	n := flag.Int("n", 20000, "ConfigMaps behind the handle that is not a source")
	rounds := flag.Int("rounds", 5, "rounds per side")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if *n < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "firstreconcile benchmark: -n and -rounds must be at least 1")
		os.Exit(2)
	}
	if err := run(*n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "firstreconcile benchmark:", err)
		os.Exit(1)
	}
}

// result is one program's start.
type result struct {
	first  time.Duration // start to the first reconcile's read
	seen   int           // ConfigMaps that read saw
	synced time.Duration // start to the ConfigMaps informer synced (kloop sides)
}

type side struct {
	name string
	run  func(ctx context.Context, cfg *rest.Config, ns string) (result, error)
}

func run(n, rounds int) error {
	ctx := context.Background()
	env, err := testenv.Start(ctx, testenv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the creates, not the client's limiter
	kc := kubernetes.NewForConfigOrDie(cfg)
	const ns = "firstreconcile"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := create(ctx, kc, ns, n); err != nil {
		return err
	}
	fmt.Printf("# %d ConfigMaps and one Secret in %s; %d rounds per side\n", n, ns, rounds)
	sides := []side{{"kloop", runKloop(false)}, {"kloop-unguarded", runKloop(true)}, {"client-go", runClientGo}}
	results := make([][]result, len(sides))
	for r := range rounds {
		for j := range sides {
			i := (j + r) % len(sides)
			res, err := sides[i].run(ctx, env.Config, ns)
			if err != nil {
				return fmt.Errorf("%s: %w", sides[i].name, err)
			}
			results[i] = append(results[i], res)
			fmt.Printf("# round %d %-16s first reconcile %6.0f ms, saw %6d ConfigMaps; ConfigMaps synced %6.0f ms\n",
				r+1, sides[i].name, ms(res.first), res.seen, ms(res.synced))
		}
	}
	med := func(i int, f func(result) float64) float64 {
		var xs []float64
		for _, r := range results[i] {
			xs = append(xs, f(r))
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	first := func(r result) float64 { return ms(r.first) }
	seen := func(r result) float64 { return float64(r.seen) }
	synced := func(r result) float64 { return ms(r.synced) }
	k, u, p := med(0, first), med(1, first), med(2, first)
	fmt.Printf("RESULT firstreconcile-start-to-first-reconcile-ms kloop=%.0f peer=%.0f ratio=%.2f unit=ms peer_name=client-go\n", k, p, k/p)
	fmt.Printf("RESULT firstreconcile-vs-unguarded-ms kloop=%.0f peer=%.0f ratio=%.2f unit=ms peer_name=kloop-unguarded\n", k, u, k/u)
	s := med(0, synced)
	fmt.Printf("RESULT firstreconcile-vs-own-sync-ms kloop=%.0f peer=%.0f ratio=%.2f unit=ms peer_name=kloop-configmaps-sync\n", k, s, k/s)
	fmt.Printf("RESULT firstreconcile-configmaps-seen kloop=%.0f peer=%.0f unguarded=%.0f unit=objects peer_name=client-go\n", med(0, seen), med(2, seen), med(1, seen))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// create makes n ConfigMaps (32 writers) and the Secret in ns.
func create(ctx context.Context, kc kubernetes.Interface, ns string, n int) error {
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i)}, Data: map[string]string{"k": "v"}}
				if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	_, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{})
	return err
}

// runKloop starts an App For the Secrets that lists the ConfigMaps in its
// first reconcile; unguarded waits only for the source and reads the raw
// Lister, as kloop did before its reads were made honest.
func runKloop(unguarded bool) func(ctx context.Context, cfg *rest.Config, ns string) (result, error) {
	return func(ctx context.Context, cfg *rest.Config, ns string) (result, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		app, err := kloop.New(cfg, kloop.Options{Name: "firstreconcile", Namespace: ns, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
		if err != nil {
			return result{}, err
		}
		cms := kloop.Objects[*corev1.ConfigMap](app)
		secrets := kloop.Objects[*corev1.Secret](app)
		firsts := make(chan int, 1)
		_, err = kloop.NewController(app, "first", func(ctx context.Context, _ cache.Key) (controller.Result, error) {
			var seen int
			if unguarded {
				seen = len(cms.Informer().Lister().ListInNamespace(ns, labels.Everything()))
			} else {
				list, err := cms.List(ctx, ns, nil)
				if err != nil {
					return controller.Result{}, err
				}
				seen = len(list)
			}
			select {
			case firsts <- seen:
			default:
			}
			return controller.Result{}, nil
		}).For(secrets).WithOptions(func(o *controller.Options[cache.Key]) {
			if unguarded {
				o.WaitForSync = func(context.Context) error { return nil }
			}
		}).Complete()
		if err != nil {
			return result{}, err
		}
		began := time.Now()
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		var res result
		syncedAt := make(chan time.Duration, 1)
		go func() {
			if cms.Informer().WaitForSync(ctx) == nil {
				syncedAt <- time.Since(began)
			}
		}()
		select {
		case res.seen = <-firsts:
			res.first = time.Since(began)
		case err := <-done:
			return result{}, errors.Join(errors.New("the App stopped before its first reconcile"), err)
		}
		res.synced = <-syncedAt
		cancel()
		return res, <-done
	}
}

// runClientGo is sample-controller's start: a factory with both informers,
// WaitForCacheSync, a worker that lists the ConfigMaps from the lister.
func runClientGo(ctx context.Context, cfg *rest.Config, ns string) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return result{}, err
	}
	began := time.Now()
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	cmInformer := f.Core().V1().ConfigMaps()
	secretInformer := f.Core().V1().Secrets()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	if _, err := secretInformer.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil {
				q.Add(key)
			}
		},
	}); err != nil {
		return result{}, err
	}
	cmLister := cmInformer.Lister()
	f.Start(ctx.Done())
	defer func() {
		cancel()
		f.Shutdown() // waits for the informers, which stop with ctx
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), cmInformer.Informer().HasSynced, secretInformer.Informer().HasSynced) {
		return result{}, errors.New("caches did not sync")
	}
	key, shutdown := q.Get()
	if shutdown {
		return result{}, errors.New("queue shut down")
	}
	list, err := cmLister.ConfigMaps(ns).List(labels.Everything())
	q.Done(key)
	if err != nil {
		return result{}, err
	}
	return result{first: time.Since(began), seen: len(list)}, nil
}
