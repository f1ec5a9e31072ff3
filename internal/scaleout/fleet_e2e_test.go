package scaleout_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	slotset "github.com/kloop-dev/kloop/internal/slots"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
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
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// The fleet test's Foos: in each cluster, fleetNamespaces namespaces with
// one Foo each, the same namespaces in every cluster (a fleet's clusters
// often share namespace names).
const (
	fleetNamespaces = 24
	fleetChanged    = 3 // Foos per cluster changed after the SIGKILL
)

// fleetMember is one cluster of the fleet test.
type fleetMember struct {
	name string
	env  *testenv.Env
	kc   kubernetes.Interface
	foos *client.Resource[*v1alpha1.Foo]
	keys []types.NamespacedName

	deployments *informer.Informer[*appsv1.Deployment] // the test's view
	changed     *await.Signal                          // poked at each Deployment change
}

// Part 4 of the fleet's acceptance: two replicas of the Foo controller, as
// separate processes, with Sharding over a fleet of three clusters (their
// Leases in a fourth, the home cluster). Each (cluster, slot) is held by
// one replica and each replica caches only its share of every cluster;
// SIGKILL of one moves its share to the other within a lease duration and
// a renew period; and no Foo (cluster, namespace, name) is reconciled by
// two replicas at overlapping times.
func TestFleetScaleOut(t *testing.T) {
	home := cp.Env(t) // skips under -short
	ctx, cancel := context.WithTimeoutCause(t.Context(), 6*time.Minute, errors.New("the fleet scale-out test did not finish in 6 minutes"))
	defer cancel()
	envs := make([]*testenv.Env, 3)
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() { envs[i], errs[i] = testenv.Start(context.Background(), testenv.Options{}) })
	}
	wg.Wait()
	for i, e := range envs {
		if e != nil {
			t.Cleanup(e.Stop)
		}
		if errs[i] != nil {
			t.Fatalf("start control plane %d: %v", i, errs[i])
		}
	}
	c := newCluster(t, ctx, home)
	dir := t.TempDir()
	var members []*fleetMember
	var names []string
	nsNames := namespaceNames(int(scenarios.Add(1)))[:fleetNamespaces] // like generated names: FNV-1a, which places them, spreads "team-01", "team-02" ... poorly
	for i, env := range envs {
		m := newFleetMember(t, ctx, string(rune('a'+i)), env, nsNames)
		if err := kubeconfig.Write(filepath.Join(dir, m.name+".kubeconfig"), env.Config); err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
		names = append(names, m.name)
	}
	c.env2 = []string{fleetDirEnv + "=" + dir, fleetClustersEnv + "=" + strings.Join(names, ",")}
	total := len(members) * fleetNamespaces

	// heldIn is the replica holding unit (cluster, hash slot h) by the
	// Leases, and how many hold it.
	heldIn := func(held map[string]slotset.Set, cluster string, h int) (string, int) {
		g := (h + slotset.Offset(cluster, slots)) % slots
		who, n := "", 0
		for id, s := range held {
			if s.Has(g) {
				who, n = id, n+1
			}
		}
		return who, n
	}

	t.Run("TwoReplicasShareThreeClusters", func(t *testing.T) {
		c.t = t
		c.start("r1")
		c.start("r2")
		c.waitConverged(ctx, "r1", "r2")
		held := c.held()
		for _, m := range members {
			for h := range slots {
				if who, n := heldIn(held, m.name, h); n != 1 || (who != "r1" && who != "r2") {
					t.Errorf("unit (%s, %d) held by %d replicas (%s), want one of r1 and r2", m.name, h, n, who)
				}
			}
		}
		cached := map[string]string{} // cluster/namespace/name → replica
		for _, id := range []string{"r1", "r2"} {
			d := c.dump(ctx, id)
			n := 0
			for _, m := range members {
				cd := d.Clusters[m.name]
				mine := map[string]bool{}
				for _, k := range cd.Foos {
					ns, _, _ := strings.Cut(k, "/")
					if who, _ := heldIn(held, m.name, slotset.Of(slotset.Hash(ns), slots)); who != id {
						t.Errorf("%s caches Foo %s of cluster %s, whose unit %s holds", id, k, m.name, who)
					}
					if prev, ok := cached[m.name+"/"+k]; ok {
						t.Errorf("Foo %s of cluster %s cached by %s and %s", k, m.name, prev, id)
					}
					cached[m.name+"/"+k], mine[k] = id, true
				}
				for key, owner := range cd.Deployments {
					ns, _, _ := strings.Cut(key, "/")
					if !mine[ns+"/"+owner] {
						t.Errorf("%s caches Deployment %s of cluster %s, not of one of its Foos", id, key, m.name)
					}
				}
				if len(cd.Deployments) != len(cd.Foos) {
					t.Errorf("%s caches %d Deployments of cluster %s for its %d Foos there", id, len(cd.Deployments), m.name, len(cd.Foos))
				}
				t.Logf("%s caches %d of %d Foos of cluster %s (and their Deployments)", id, len(cd.Foos), fleetNamespaces, m.name)
				n += len(cd.Foos)
			}
			if n == 0 || n == total {
				t.Errorf("%s caches %d of the fleet's %d Foos, want a share", id, n, total)
			}
			for inf, mode := range d.Filtering {
				if mode != "server" {
					t.Errorf("%s: informer %s filters %s-side, want server-side (each cluster's API server sends the share)", id, inf, mode)
				}
			}
			t.Logf("%s:\n%s", id, d.Table)
		}
		if len(cached) != total {
			t.Errorf("the replicas cache %d Foos together, want the fleet's %d", len(cached), total)
		}
		// A namespace found in every cluster is not one replica's in all
		// of them: each cluster's slots are turned by its own offset.
		split := 0
		for _, ns := range nsNames {
			k := ns + "/foo"
			if cached["a/"+k] != cached["b/"+k] || cached["a/"+k] != cached["c/"+k] {
				split++
			}
		}
		t.Logf("%d of %d namespaces are held by different replicas in different clusters", split, len(nsNames))
		if split == 0 {
			t.Errorf("every namespace is held by one replica in all three clusters: the clusters' slots are not turned apart")
		}
		for _, m := range members {
			m.waitDeployments(t, ctx, func(d *appsv1.Deployment) bool { return true }, fleetNamespaces)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("SIGKILLMovesTheShare", func(t *testing.T) {
		c.t = t
		dead := c.held()["r2"]
		c.kill("r2")
		killedAt := time.Now()
		// Change Foos of r2's share in each cluster before anyone took over.
		var changed []string
		for _, m := range members {
			n := 0
			for _, k := range m.keys {
				if n < fleetChanged && dead.Has(slotset.In(m.name, k.Namespace, slots)) {
					if _, err := m.foos.Patch(ctx, k.Namespace, k.Name, types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), client.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
					changed = append(changed, m.name+"/"+k.String())
					n++
				}
			}
			if n < fleetChanged {
				t.Fatalf("r2's share of cluster %s holds %d Foos, want at least %d", m.name, n, fleetChanged)
			}
		}
		takenAt := c.waitLeases(ctx, "r2's slots held by r1", func(h map[string]slotset.Set) bool {
			return h["r1"].Intersect(dead).Equal(dead)
		})
		took := takenAt.Sub(killedAt)
		t.Logf("r2's %d slots (its share of 3 clusters) taken over %v after SIGKILL", dead.Len(), took.Round(time.Millisecond))
		if took > takeoverSpan {
			t.Errorf("takeover took %v, want at most the lease duration and a renew period (%v)", took, takeoverSpan)
		}
		// The Lease lists the slots before r1's caches have filled: read
		// them once r1 reconciles every slot.
		d := c.dumpPath(ctx, "r1", fmt.Sprintf("/cache?active=%d", slots))
		for _, m := range members {
			if n := len(d.Clusters[m.name].Foos); n != fleetNamespaces {
				t.Errorf("after the takeover r1 caches %d Foos of cluster %s, want all %d", n, m.name, fleetNamespaces)
			}
			m.waitDeployments(t, ctx, func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 0) == 2 }, fleetChanged)
		}
		recs := c.records(false)
		for _, k := range changed {
			if !slices.ContainsFunc(recs[k], func(iv interval) bool { return iv.replica == "r1" && iv.start.After(killedAt) }) {
				t.Errorf("changed Foo %s was not reconciled by r1 after the kill", k)
			}
		}
	})

	t.Run("NoFooReconciledByTwoReplicasAtOnce", func(t *testing.T) {
		c.t = t
		c.stopAll()
		recs := c.records(true)
		overlaps, n := 0, 0
		for key, ivs := range recs {
			n += len(ivs)
			for i := range ivs {
				for j := i + 1; j < len(ivs); j++ {
					a, b := ivs[i], ivs[j]
					if a.replica != b.replica && a.start.Before(b.end) && b.start.Before(a.end) {
						overlaps++
						t.Errorf("%s reconciled by %s %v–%v and by %s %v–%v", key, a.replica, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro), b.replica, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro))
					}
				}
			}
		}
		if len(recs) < total {
			t.Errorf("%d Foos reconciled, want all %d of the fleet", len(recs), total)
		}
		t.Logf("%d reconciles of %d Foos in 3 clusters; %d overlapping pairs", n, len(recs), overlaps)
	})
}

// newFleetMember installs the Foo CRD in a cluster of the fleet and
// creates its namespaces and Foos.
func newFleetMember(t *testing.T, ctx context.Context, name string, env *testenv.Env, nsNames []string) *fleetMember {
	t.Helper()
	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		t.Fatalf("cluster %s: %v", name, err)
	}
	cl, err := client.New(env.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	m := &fleetMember{name: name, env: env, kc: kubernetes.NewForConfigOrDie(env.Config)}
	if m.foos, err = client.NewResource[*v1alpha1.Foo](cl, v1alpha1.Resource); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nsNames {
		if _, err := m.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		if _, err := m.foos.Create(ctx, &v1alpha1.Foo{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo"},
			Spec:       v1alpha1.FooSpec{DeploymentName: "foo", Replicas: ptr.To[int32](1)},
		}); err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		m.keys = append(m.keys, types.NamespacedName{Namespace: ns, Name: "foo"})
	}
	m.changed = &await.Signal{}
	f := informer.NewFactory(env.Config, informer.FactoryOptions{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	if m.deployments, err = informer.Of[*appsv1.Deployment](f, informer.Scope{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.deployments.AddHandler(changes[*appsv1.Deployment](m.changed), informer.HandlerOptions{}); err != nil {
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
	return m
}

// waitDeployments waits until n of the cluster's Deployments match.
func (m *fleetMember) waitDeployments(t *testing.T, ctx context.Context, match func(*appsv1.Deployment) bool, n int) {
	t.Helper()
	for {
		ch := m.changed.Changed()
		got := 0
		for _, d := range m.deployments.Lister().List(nil) {
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
			t.Fatalf("cluster %s: %d of %d Deployments: %v", m.name, got, n, context.Cause(ctx))
		}
	}
}
