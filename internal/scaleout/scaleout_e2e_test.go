package scaleout_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	slotset "github.com/kloop-dev/kloop/internal/slots"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/kubeconfig"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

const (
	namespaces   = 300
	foosPerNS    = 2
	totalFoos    = namespaces * foosPerNS
	changedFoos  = 10
	takeoverSpan = leaseDuration + retryPeriod
)

// The Foo controller's acceptance for sharding: 3 replicas share 600 Foos
// in 300 namespaces; one is killed with SIGKILL and the others take its
// slots within a lease duration and a renew period; it comes back; a
// fourth joins and takes a quarter of the slots; and through it all no Foo
// is reconciled by two replicas at overlapping times. Once with the API
// server filtering (sharded list and watch on), once with every replica
// filtering on its own (the feature gate off).
func TestScaleOut(t *testing.T) {
	t.Run("server-side", func(t *testing.T) {
		scenario(t, cp.Env(t), "server")
	})
	t.Run("gate-off", func(t *testing.T) {
		if testing.Short() {
			t.Skip("needs a control plane (not run with -short)")
		}
		env := testenv.StartT(t, testenv.Options{FeatureGates: map[string]bool{"ShardedListAndWatch": false}})
		scenario(t, env, "client")
	})
}

func scenario(t *testing.T, env *testenv.Env, filtering string) {
	ctx, cancel := context.WithTimeoutCause(t.Context(), 8*time.Minute, errors.New("the scale-out scenario did not finish in 8 minutes"))
	defer cancel()
	c := newCluster(t, ctx, env)
	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		t.Fatal(err)
	}
	c.createFoos(ctx)

	t.Run("ThreeReplicasShare600Foos", func(t *testing.T) {
		c.t = t
		for _, id := range []string{"r1", "r2", "r3"} {
			c.start(id)
		}
		c.waitConverged(ctx, "r1", "r2", "r3")
		c.waitDeployments(ctx, func(d *appsv1.Deployment) bool { return true }, totalFoos, "every Foo's Deployment")
		seen := map[string]string{}
		for _, id := range []string{"r1", "r2", "r3"} {
			d := c.dump(ctx, id)
			if n := len(d.Foos); n < 150 || n > 250 {
				t.Errorf("%s caches %d Foos, want 150-250", id, n)
			}
			mine := map[string]bool{}
			for _, k := range d.Foos {
				if prev, ok := seen[k]; ok {
					t.Errorf("Foo %s cached by %s and %s", k, prev, id)
				}
				seen[k], mine[k] = id, true
			}
			for key, owner := range d.Deployments {
				ns, _, _ := strings.Cut(key, "/")
				if !mine[ns+"/"+owner] {
					t.Errorf("%s caches Deployment %s of Foo %s/%s, which is not one of its Foos", id, key, ns, owner)
				}
			}
			if len(d.Deployments) != len(d.Foos) {
				t.Errorf("%s caches %d Deployments for its %d Foos", id, len(d.Deployments), len(d.Foos))
			}
			for inf, mode := range d.Filtering {
				if mode != filtering {
					t.Errorf("%s: informer %s filters %s-side, want %s-side", id, inf, mode, filtering)
				}
			}
			body := c.get(ctx, id, "/readyz?verbose")
			if !strings.Contains(body, "[+]sharding ok") || !strings.Contains(body, "shard group "+c.group) || !strings.Contains(body, "MEMBER") {
				t.Errorf("%s /readyz?verbose has no shard table:\n%s", id, body)
			}
			t.Logf("%s: %d Foos, %d Deployments\n%s", id, len(d.Foos), len(d.Deployments), d.Table)
		}
		if len(seen) != totalFoos {
			t.Errorf("the replicas cache %d Foos together, want %d", len(seen), totalFoos)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("SIGKILLedReplicaIsTakenOver", func(t *testing.T) {
		c.t = t
		dead := c.held()["r3"]
		c.kill("r3")
		killedAt := time.Now()
		// Change Foos of the dead replica before anyone took over.
		var changed []string
		for _, f := range c.foos {
			if len(changed) == changedFoos {
				break
			}
			if dead.Has(slotset.Of(slotset.Hash(f.Namespace), slots)) {
				c.patchReplicas(ctx, f, 2)
				changed = append(changed, f.Namespace+"/"+f.Name)
			}
		}
		if len(changed) < changedFoos {
			t.Fatalf("r3 held %s, which holds only %d Foos", dead, len(changed))
		}
		takenAt := c.waitLeases(ctx, "r3's slots held by r1 and r2", func(h map[string]slotset.Set) bool {
			return h["r1"].Union(h["r2"]).Intersect(dead).Equal(dead)
		})
		took := takenAt.Sub(killedAt)
		t.Logf("r3's %d slots taken over %v after SIGKILL", dead.Len(), took.Round(time.Millisecond))
		if took > takeoverSpan {
			t.Errorf("takeover took %v, want at most the lease duration and a renew period (%v)", took, takeoverSpan)
		}
		c.waitConverged(ctx, "r1", "r2")
		want := map[string]bool{}
		for _, k := range changed {
			want[k] = true
		}
		c.waitDeployments(ctx, func(d *appsv1.Deployment) bool {
			ref := metav1.GetControllerOf(d)
			return ref != nil && want[d.Namespace+"/"+ref.Name] && ptr.Deref(d.Spec.Replicas, 0) == 2
		}, changedFoos, "the changed Foos' Deployments scaled to 2")
		recs := c.records(false)
		for _, k := range changed {
			if !slices.ContainsFunc(recs[k], func(iv interval) bool { return iv.replica != "r3" && iv.start.After(killedAt) }) {
				t.Errorf("changed Foo %s was not reconciled by r1 or r2 after the kill", k)
			}
		}
	})
	if t.Failed() {
		return
	}

	t.Run("AFourthReplicaTakesAQuarter", func(t *testing.T) {
		c.t = t
		c.start("r3b") // the killed replica's replacement
		c.waitConverged(ctx, "r1", "r2", "r3b")
		before := c.held()
		c.start("r4")
		c.waitConverged(ctx, "r1", "r2", "r3b", "r4")
		after := c.held()
		moved := 0
		for s := range slots {
			if holderOf(before, s, "r1", "r2", "r3b") != holderOf(after, s, "r1", "r2", "r3b", "r4") {
				moved++
			}
		}
		t.Logf("r4 took %d slots; %d of %d slots moved", after["r4"].Len(), moved, slots)
		if after["r4"].Len() != slots/4 {
			t.Errorf("r4 holds %d slots, want %d", after["r4"].Len(), slots/4)
		}
		if moved > slots*4/10 {
			t.Errorf("%d of %d slots moved, want about a quarter", moved, slots)
		}
		for _, id := range []string{"r1", "r2", "r3b", "r4"} {
			if n := len(c.dump(ctx, id).Foos); n < 90 || n > 210 {
				t.Errorf("%s caches %d Foos of %d, want about a quarter", id, n, totalFoos)
			}
		}
	})

	t.Run("NoFooReconciledByTwoReplicasAtOnce", func(t *testing.T) {
		c.t = t
		c.stopAll()
		recs := c.records(true)
		overlaps := 0
		total := 0
		for key, ivs := range recs {
			total += len(ivs)
			for i := range ivs {
				for j := i + 1; j < len(ivs); j++ {
					a, b := ivs[i], ivs[j]
					if a.replica != b.replica && a.start.Before(b.end) && b.start.Before(a.end) {
						overlaps++
						if overlaps <= 10 {
							t.Errorf("%s reconciled by %s %v–%v and by %s %v–%v", key, a.replica, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro), b.replica, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro))
						}
					}
				}
			}
		}
		if len(recs) < totalFoos {
			t.Errorf("%d Foos reconciled, want all %d", len(recs), totalFoos)
		}
		t.Logf("%d reconciles of %d Foos; %d overlapping pairs", total, len(recs), overlaps)
	})
}

// cluster is one scenario's control plane, Foos and replica processes (for
// the fleet test, the home cluster's: the Leases are there).
type cluster struct {
	t       *testing.T
	env     *testenv.Env
	group   string
	dir     string
	env2    []string // more environment for the replicas (the fleet test's)
	kc      kubernetes.Interface
	foosRes *client.Resource[*v1alpha1.Foo]
	foos    []types.NamespacedName

	leases      *informer.Informer[*coordinationv1.Lease]
	deployments *informer.Informer[*appsv1.Deployment]
	changed     *await.Signal

	mu     sync.Mutex
	procs  map[string]*replicaProc
	killed map[string]time.Time
}

type replicaProc struct {
	id   string
	cmd  *exec.Cmd
	url  string
	done chan error
	log  string
}

func newCluster(t *testing.T, ctx context.Context, env *testenv.Env) *cluster {
	c := &cluster{
		t:       t,
		env:     env,
		group:   fmt.Sprintf("scaleout-%d", time.Now().UnixNano()%1e9),
		dir:     t.TempDir(),
		kc:      kubernetes.NewForConfigOrDie(env.Config),
		changed: &await.Signal{},
		procs:   map[string]*replicaProc{},
		killed:  map[string]time.Time{},
	}
	cl, err := client.New(env.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.foosRes, err = client.NewResource[*v1alpha1.Foo](cl, v1alpha1.Resource); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.group}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The test's own view of the group's Leases and of the Deployments.
	f := informer.NewFactory(env.Config, informer.FactoryOptions{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	if c.leases, err = informer.Of[*coordinationv1.Lease](f, informer.Scope{Namespace: c.group}); err != nil {
		t.Fatal(err)
	}
	if c.deployments, err = informer.Of[*appsv1.Deployment](f, informer.Scope{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.leases.AddHandler(changes[*coordinationv1.Lease](c.changed), informer.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.deployments.AddHandler(changes[*appsv1.Deployment](c.changed), informer.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(fctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	if err := f.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range c.procsList() {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() || os.Getenv("KLOOP_TEST_LOGS") != "" {
			for _, p := range c.procsList() {
				t.Logf("log of %s (last 40 lines):\n%s", p.id, tail(p.log, 40))
			}
		}
		if dir := os.Getenv("KLOOP_TEST_LOGS"); dir != "" {
			for _, p := range c.procsList() {
				b, _ := os.ReadFile(p.log)
				_ = os.WriteFile(filepath.Join(dir, p.id+".log"), b, 0o600)
			}
		}
	})
	return c
}

// scenarios counts the scenarios of this process, to name their
// namespaces apart on a shared control plane.
var scenarios atomic.Int32

// namespaceNames are the scenario's namespaces: a fixed set of names like
// generated ones (a prefix and 5 random characters), the same in every
// run. Random names would do as well but for the spread: hashing 300
// namespaces into 3 shares leaves one outside 150-250 Foos about once in
// 70 runs; these names spread 210/184/206 (first scenario).
func namespaceNames(scenario int) []string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	rng := rand.New(rand.NewPCG(uint64(scenario), 0x5ca1e0))
	names := make([]string, namespaces)
	for i := range names {
		b := make([]byte, 5)
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		names[i] = fmt.Sprintf("so%d-%s", scenario, b)
	}
	return names
}

// createFoos makes the namespaces and their Foos, a few at a time.
func (c *cluster) createFoos(ctx context.Context) {
	names := namespaceNames(int(scenarios.Add(1)))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				ns, err := c.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
				if err == nil {
					for j := range foosPerNS {
						name := fmt.Sprintf("foo-%d-%d", i, j)
						_, err = c.foosRes.Create(ctx, &v1alpha1.Foo{
							ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
							Spec:       v1alpha1.FooSpec{DeploymentName: name, Replicas: ptr.To[int32](1)},
						})
						if err != nil {
							break
						}
						mu.Lock()
						c.foos = append(c.foos, types.NamespacedName{Namespace: ns.Name, Name: name})
						mu.Unlock()
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range namespaces {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("creating the Foos: %v", err)
	}
	sort.Slice(c.foos, func(i, j int) bool { return c.foos[i].String() < c.foos[j].String() })
}

func (c *cluster) patchReplicas(ctx context.Context, f types.NamespacedName, n int) {
	c.t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	if _, err := c.foosRes.Patch(ctx, f.Namespace, f.Name, types.MergePatchType, patch, client.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) procsList() []*replicaProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*replicaProc
	for _, p := range c.procs {
		out = append(out, p)
	}
	return out
}

// start runs the replica id: this test binary in replica mode.
func (c *cluster) start(id string) {
	c.t.Helper()
	kcPath := filepath.Join(c.dir, "kubeconfig")
	if _, err := os.Stat(kcPath); err != nil {
		if err := kubeconfig.Write(kcPath, c.env.Config); err != nil {
			c.t.Fatal(err)
		}
	}
	logPath := filepath.Join(c.dir, id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		replicaEnv+"="+id,
		kubeconfigEnv+"="+kcPath,
		groupEnv+"="+c.group,
		recordsEnv+"="+filepath.Join(c.dir, "records"),
	)
	cmd.Env = append(cmd.Env, c.env2...)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &replicaProc{id: id, cmd: cmd, done: make(chan error, 1), log: logPath}
	c.mu.Lock()
	c.procs[id] = p
	c.mu.Unlock()
	line, err := bufio.NewReader(out).ReadString('\n')
	go func() {
		_, _ = io.Copy(io.Discard, out)
		p.done <- cmd.Wait()
	}()
	if err != nil {
		c.t.Fatalf("replica %s printed no address: %v\n%s", id, err, tail(logPath, 40))
	}
	p.url = strings.TrimSpace(line)
}

func (c *cluster) kill(id string) {
	c.t.Helper()
	p := c.procs[id]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	<-p.done
	c.mu.Lock()
	c.killed[id] = time.Now()
	c.mu.Unlock()
}

// stopAll stops the running replicas with SIGTERM and checks they exit 0.
func (c *cluster) stopAll() {
	c.t.Helper()
	for _, p := range c.procsList() {
		if p.cmd.ProcessState != nil {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procsList() {
		if _, killed := c.killed[p.id]; killed {
			continue
		}
		select {
		case err := <-p.done:
			if err != nil {
				c.t.Errorf("replica %s: %v\n%s", p.id, err, tail(p.log, 20))
			}
		case <-time.After(60 * time.Second):
			c.t.Errorf("replica %s did not stop within 60s of SIGTERM", p.id)
		}
	}
}

func (c *cluster) get(ctx context.Context, id, path string) string {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.procs[id].url+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("GET %s of %s: %v", path, id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s of %s: %s\n%s", path, id, resp.Status, b)
	}
	return string(b)
}

// dump reads a replica's caches once it is settled.
func (c *cluster) dump(ctx context.Context, id string) cacheDump {
	c.t.Helper()
	return c.dumpPath(ctx, id, "/cache")
}

// dumpPath reads a replica's caches from path, /cache with a query.
func (c *cluster) dumpPath(ctx context.Context, id, path string) cacheDump {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var d cacheDump
	if err := json.Unmarshal([]byte(c.get(ctx, id, path)), &d); err != nil {
		c.t.Fatal(err)
	}
	return d
}

// held reads the slots each member's Lease lists, from the test's view.
func (c *cluster) held() map[string]slotset.Set {
	out := map[string]slotset.Set{}
	for _, l := range c.leases.Lister().List(nil) {
		id := ptr.Deref(l.Spec.HolderIdentity, "")
		s, err := slotset.Parse(l.Annotations[sharding.HeldAnnotation], slots)
		if err != nil {
			c.t.Fatalf("lease %s: %v", l.Name, err)
		}
		if l.Annotations[sharding.DrainingAnnotation] != "" {
			id += "(draining)"
		}
		out[id] = s
	}
	return out
}

// holderOf is the one of ids whose Lease lists slot ("" for none). The
// Lease of a killed replica stays behind, expired, and is not asked.
func holderOf(held map[string]slotset.Set, slot int, ids ...string) string {
	for _, id := range ids {
		if held[id].Has(slot) {
			return id
		}
	}
	return ""
}

// waitLeases waits until cond holds of the Leases and returns when it did.
func (c *cluster) waitLeases(ctx context.Context, what string, cond func(map[string]slotset.Set) bool) time.Time {
	c.t.Helper()
	for {
		ch := c.changed.Changed()
		h := c.held()
		if cond(h) {
			return time.Now()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.t.Fatalf("%s: %v; Leases hold %v", what, context.Cause(ctx), h)
		}
	}
}

// waitConverged waits until exactly ids hold every slot between them, as
// the assignment over ids gives them, with nothing draining; then until
// each of them is settled.
func (c *cluster) waitConverged(ctx context.Context, ids ...string) {
	c.t.Helper()
	owners := slotset.Assign(ids, slots)
	c.waitLeases(ctx, fmt.Sprintf("slots split between %v", ids), func(h map[string]slotset.Set) bool {
		for _, id := range ids {
			want := slotset.New(slots)
			for s, o := range owners {
				if o == id {
					want = want.Union(slotset.New(slots, s))
				}
			}
			if !h[id].Equal(want) {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		c.dump(ctx, id)
	}
}

// waitDeployments waits until n Deployments satisfy match.
func (c *cluster) waitDeployments(ctx context.Context, match func(*appsv1.Deployment) bool, n int, what string) {
	c.t.Helper()
	for {
		ch := c.changed.Changed()
		got := 0
		for _, d := range c.deployments.Lister().List(nil) {
			if match(d) {
				got++
			}
		}
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.t.Fatalf("%s: %d of %d: %v", what, got, n, context.Cause(ctx))
		}
	}
}

type interval struct {
	replica    string
	start, end time.Time
}

// records reads the reconciles the replicas recorded, by Foo key. A
// reconcile a killed replica did not finish lasts until it was killed; one
// a running replica has not finished yet lasts until now, unless final
// says every replica has stopped, which makes it an error.
func (c *cluster) records(final bool) map[string][]interval {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "records"))
	if err != nil {
		c.t.Fatal(err)
	}
	type rk struct{ replica, key string }
	open := map[rk][]time.Time{}
	out := map[string][]interval{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			c.t.Fatalf("record %q", line)
		}
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			c.t.Fatal(err)
		}
		at := time.Unix(0, ns)
		k := rk{f[1], f[2]}
		switch f[0] {
		case "S":
			open[k] = append(open[k], at)
		case "E":
			starts := open[k]
			if len(starts) == 0 {
				c.t.Fatalf("end without start: %q", line)
			}
			out[k.key] = append(out[k.key], interval{k.replica, starts[0], at})
			open[k] = starts[1:]
		}
	}
	for k, starts := range open {
		for _, s := range starts {
			end, killed := c.killed[k.replica]
			if !killed && final {
				c.t.Errorf("%s's reconcile of %s from %v never ended", k.replica, k.key, s)
				continue
			}
			if !killed {
				end = time.Now()
			}
			out[k.key] = append(out[k.key], interval{k.replica, s, end})
		}
	}
	return out
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
