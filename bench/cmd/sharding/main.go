// Command sharding measures what sharding a controller's informers saves
// each replica, against a real API server that it starts itself (package
// testenv, with sharded list and watch on):
//
//	N ConfigMaps (default 30,000) in one namespace, each with a 512-byte
//	payload, created by 8 concurrent writers before anything is measured.
//
// Each replica is a process of its own (this command, run again in replica
// mode), so that its heap is its own: an informer over the ConfigMaps with
// one no-op handler, the defaults of informer.Of. Three setups, one after
// the other:
//
//   - unsharded: one replica with a plain informer (the "peer");
//   - server: three replicas of a shard group (sharding.Member, 64 slots,
//     by UID), whose informers send shard selectors the API server applies;
//   - client: the same three replicas with ClientSideOnly, which is what a
//     server without the feature gives: every replica receives every object
//     and keeps its share.
//
// Figures, per replica (the largest of the three for the sharded setups):
//
//   - sharding-heap-{server,client}: Go heap retained once synced and
//     settled: HeapAlloc after two forced GCs, minus the same before the
//     informer started.
//   - sharding-watch-events-{server,client}: watch events the replica's
//     reflector received while U updates (default 3,000, spread over the
//     objects) were made: each setup ends its updates with one more on an
//     object of each replica, and counts when that one arrives.
//
// A comment line gives the objects each replica received to sync (LIST
// items or the streaming list's events).
//
// Run with: cd bench && go run ./cmd/sharding -n 30000
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/kubeconfig"
	slotset "github.com/kloop-dev/kloop/internal/slots"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
)

const (
	namespace    = "bench"
	leaseNS      = "bench-leases"
	seedWriters  = 8
	slots        = 64
	replicaEnv   = "KLOOP_BENCH_SHARDING_REPLICA" // identity: run as a replica
	modeEnv      = "KLOOP_BENCH_SHARDING_MODE"    // unsharded, server, client
	kubeEnv      = "KLOOP_BENCH_SHARDING_KUBECONFIG"
	membersEnv   = "KLOOP_BENCH_SHARDING_MEMBERS"
	replicaCount = 3
)

func main() {
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replica())
	}
	n := flag.Int("n", 30000, "ConfigMaps to seed")
	updates := flag.Int("updates", 3000, "updates whose watch events are counted")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if err := run(*n, *updates); err != nil {
		fmt.Fprintln(os.Stderr, "sharding benchmark:", err)
		os.Exit(1)
	}
}

// result is what one replica reports.
type result struct {
	heap       float64 // bytes retained once synced
	objects    int     // cached once synced
	syncEvents float64 // reflector events to sync
	churn      float64 // reflector events during the updates
}

func run(n, updates int) error {
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
	dir, err := os.MkdirTemp("", "kloop-bench-sharding-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := kubeconfig.Write(kcPath, env.Config); err != nil {
		return err
	}
	fmt.Printf("sharding benchmark: N=%d ConfigMaps (512-byte payload) in one namespace, %d updates counted, %d replicas of %d slots by UID, GOMAXPROCS=%d\n",
		n, updates, replicaCount, slots, runtime.GOMAXPROCS(0))
	for _, ns := range []string{namespace, leaseNS} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	t := time.Now()
	if err := seed(ctx, kc, n); err != nil {
		return err
	}
	fmt.Printf("# seeded %d ConfigMaps in %v\n", n, time.Since(t).Round(time.Millisecond))

	results := map[string][]result{}
	for _, mode := range []string{"unsharded", "server", "client"} {
		t := time.Now()
		rs, err := measure(ctx, kc, kcPath, mode, n, updates)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		results[mode] = rs
		for i, r := range rs {
			fmt.Printf("# %s replica %d: %d objects cached, heap %.1f MiB, %.0f objects received to sync, %.0f watch events during the updates\n",
				mode, i+1, r.objects, r.heap/(1<<20), r.syncEvents, r.churn)
		}
		fmt.Printf("# %s took %v\n", mode, time.Since(t).Round(time.Millisecond))
	}
	peer := results["unsharded"][0]
	worst := func(rs []result, f func(result) float64) float64 {
		m := 0.0
		for _, r := range rs {
			m = max(m, f(r))
		}
		return m
	}
	for _, mode := range []string{"server", "client"} {
		h := worst(results[mode], func(r result) float64 { return r.heap })
		fmt.Printf("RESULT sharding-heap-%s kloop=%.1f peer=%.1f ratio=%.2f unit=MiB peer_name=unsharded\n", mode, h/(1<<20), peer.heap/(1<<20), h/peer.heap)
	}
	for _, mode := range []string{"server", "client"} {
		e := worst(results[mode], func(r result) float64 { return r.churn })
		fmt.Printf("RESULT sharding-watch-events-%s kloop=%.0f peer=%.0f ratio=%.2f unit=events peer_name=unsharded\n", mode, e, peer.churn, e/peer.churn)
	}
	for _, mode := range []string{"server", "client"} {
		e := worst(results[mode], func(r result) float64 { return r.syncEvents })
		fmt.Printf("# objects received to sync, %s: %.0f per replica at most, against %.0f unsharded (ratio %.2f)\n", mode, e, peer.syncEvents, e/peer.syncEvents)
	}
	fmt.Printf("# total %v\n", time.Since(began).Round(time.Second))
	return nil
}

// seed creates n ConfigMaps with a few concurrent writers.
func seed(ctx context.Context, kc kubernetes.Interface, n int) error {
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
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: namespace, Labels: map[string]string{"app": "bench"}},
					Data:       map[string]string{"payload": hex.EncodeToString(buf)},
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

// proc is one replica process and its line protocol: it prints "SYNCED
// heap objects events" once settled, then for each "FENCE name rv" line it
// is sent, "FENCED events" once its cache holds name at rv.
type proc struct {
	id  string
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *proc) line(ctx context.Context, prefix string) ([]string, error) {
	got := make(chan []string, 1)
	fail := make(chan error, 1)
	go func() {
		if !p.out.Scan() {
			fail <- fmt.Errorf("replica %s ended: %v", p.id, p.out.Err())
			return
		}
		got <- strings.Fields(p.out.Text())
	}()
	select {
	case f := <-got:
		if len(f) == 0 || f[0] != prefix {
			return nil, fmt.Errorf("replica %s said %q, want %s", p.id, strings.Join(f, " "), prefix)
		}
		return f[1:], nil
	case err := <-fail:
		return nil, err
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		return nil, fmt.Errorf("replica %s: no %s line: %w", p.id, prefix, context.Cause(ctx))
	}
}

func measure(ctx context.Context, kc kubernetes.Interface, kubeconfig, mode string, n, updates int) ([]result, error) {
	count := replicaCount
	if mode == "unsharded" {
		count = 1
	}
	ctx, cancel := context.WithTimeoutCause(ctx, 15*time.Minute, errors.New("a setup did not finish in 15 minutes"))
	defer cancel()
	var procs []*proc
	defer func() {
		for _, p := range procs {
			_ = p.in.Close()
			done := make(chan struct{})
			go func() { _ = p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				_ = p.cmd.Process.Kill()
				<-done
			}
		}
	}()
	for i := range count {
		id := fmt.Sprintf("%s-%d", mode, i+1)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), replicaEnv+"="+id, modeEnv+"="+mode, kubeEnv+"="+kubeconfig, membersEnv+"="+strconv.Itoa(count))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		procs = append(procs, &proc{id: id, cmd: cmd, in: in, out: bufio.NewScanner(out)})
	}
	rs := make([]result, count)
	for i, p := range procs {
		f, err := p.line(ctx, "SYNCED")
		if err != nil {
			return nil, err
		}
		rs[i].heap, _ = strconv.ParseFloat(f[0], 64)
		rs[i].objects, _ = strconv.Atoi(f[1])
		rs[i].syncEvents, _ = strconv.ParseFloat(f[2], 64)
	}

	// The updates: an annotation on every (n/updates)-th ConfigMap.
	step := max(n/updates, 1)
	var wg sync.WaitGroup
	errs := make(chan error, seedWriters)
	for w := range seedWriters {
		wg.Go(func() {
			for i := w * step; i < n && i/step < updates; i += seedWriters * step {
				if _, err := touch(ctx, kc, fmt.Sprintf("cm-%06d", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	// A last update on an object of each replica, which it waits for.
	fences, err := fenceObjects(ctx, kc, mode, procs, n)
	if err != nil {
		return nil, err
	}
	for i, p := range procs {
		rv, err := touch(ctx, kc, fences[i])
		if err != nil {
			return nil, err
		}
		if _, err := fmt.Fprintf(p.in, "FENCE %s %s\n", fences[i], rv); err != nil {
			return nil, err
		}
	}
	for i, p := range procs {
		f, err := p.line(ctx, "FENCED")
		if err != nil {
			return nil, err
		}
		total, _ := strconv.ParseFloat(f[0], 64)
		rs[i].churn = total - rs[i].syncEvents
	}
	return rs, nil
}

func touch(ctx context.Context, kc kubernetes.Interface, name string) (string, error) {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"bench-touched":%q}}}`, strconv.FormatInt(time.Now().UnixNano(), 10))
	cm, err := kc.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return "", fmt.Errorf("update %s: %w", name, err)
	}
	return cm.ResourceVersion, nil
}

// fenceObjects picks, for each replica, a ConfigMap in its slots (any for
// the unsharded one), from the members' Leases.
func fenceObjects(ctx context.Context, kc kubernetes.Interface, mode string, procs []*proc, n int) ([]string, error) {
	if mode == "unsharded" {
		return []string{fmt.Sprintf("cm-%06d", n-1)}, nil
	}
	leases, err := kc.CoordinationV1().Leases(leaseNS).List(ctx, metav1.ListOptions{LabelSelector: sharding.GroupLabel + "=bench-" + mode})
	if err != nil {
		return nil, err
	}
	held := map[string]slotset.Set{}
	for _, l := range leases.Items {
		s, err := slotset.Parse(l.Annotations[sharding.HeldAnnotation], slots)
		if err != nil {
			return nil, err
		}
		held[holder(l)] = s
	}
	list, err := kc.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(procs))
	for i, p := range procs {
		for _, cm := range list.Items {
			if held[p.id].Has(slotset.Of(slotset.Hash(string(cm.UID)), slots)) {
				out[i] = cm.Name
				break
			}
		}
		if out[i] == "" {
			return nil, fmt.Errorf("no ConfigMap in the slots of %s (%s)", p.id, held[p.id])
		}
	}
	return out, nil
}

func holder(l coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// replica is one replica process: see proc for its protocol.
func replica() int {
	id, mode := os.Getenv(replicaEnv), os.Getenv(modeEnv)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", id)
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	fail := func(err error) int {
		log.Error("replica failed", "err", err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(kubeEnv))
	if err != nil {
		return fail(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	members, _ := strconv.Atoi(os.Getenv(membersEnv))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	base := heap()

	reg := prometheus.NewRegistry()
	fopts := informer.FactoryOptions{Logger: log, Registerer: reg}
	var m *sharding.Member
	if mode != "unsharded" {
		m, err = sharding.New(cfg, sharding.Options{
			Group:          "bench-" + mode,
			Namespace:      leaseNS,
			Identity:       id,
			Key:            sharding.ByUID,
			Slots:          slots,
			LeaseDuration:  6 * time.Second,
			RenewDeadline:  4 * time.Second,
			RetryPeriod:    time.Second,
			ClientSideOnly: mode == "client",
			Logger:         log,
			Registerer:     reg,
		})
		if err != nil {
			return fail(err)
		}
		fopts.Restrict = m.Shard
	}
	f := informer.NewFactory(cfg, fopts)
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: namespace})
	if err != nil {
		return fail(err)
	}
	if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{}, informer.HandlerOptions{}); err != nil {
		return fail(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { _ = f.Start(ctx) })
	if m != nil {
		wg.Go(func() { _ = m.Start(ctx) })
	}
	if err := inf.WaitForSync(ctx); err != nil {
		return fail(err)
	}
	if m != nil {
		for {
			ch := m.StatusChanged()
			st := m.Status()
			live := 0
			for _, row := range st.Members {
				if row.Live {
					live++
				}
			}
			if st.Settled && live == members {
				break
			}
			<-ch
		}
	}
	fmt.Printf("SYNCED %.0f %d %.0f\n", heap()-base, inf.Status().Objects, events(reg))

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 3 || f[0] != "FENCE" {
			return fail(fmt.Errorf("unexpected line %q", in.Text()))
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := inf.Lister().WaitFor(wctx, cache.Key{Namespace: namespace, Name: f[1]}, f[2])
		cancel()
		if err != nil {
			return fail(fmt.Errorf("waiting for %s at %s: %w", f[1], f[2], err))
		}
		fmt.Printf("FENCED %.0f\n", events(reg))
	}
	return 0
}

// heap is HeapAlloc after two forced GCs.
func heap() float64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}

// events sums the reflector's object events: everything it received from
// the API server, before any filtering.
func events(g prometheus.Gatherer) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "kloop_reflector_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && slices.Contains([]string{"Added", "Modified", "Deleted", "RelistItem"}, l.GetValue()) {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
