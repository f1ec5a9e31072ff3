package sharding_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// replica is one in-process member with a sharded ConfigMap informer and a
// gated controller that records what it reconciles.
type replica struct {
	id     string
	reg    *prometheus.Registry
	member *sharding.Member
	inf    *informer.Informer[*corev1.ConfigMap]
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu        sync.Mutex
	reconcile map[string]int
	note      *await.Signal // poked at each reconcile
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("KLOOP_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func startReplica(t *testing.T, cfg *rest.Config, leaseNS, id, run string, clientSide bool, note *await.Signal) *replica {
	t.Helper()
	r := &replica{id: id, reconcile: map[string]int{}, note: note}
	reg := prometheus.NewRegistry()
	r.reg = reg
	log := testLogger(t).With("replica", id)
	m, err := sharding.New(cfg, sharding.Options{
		Group:          run,
		Namespace:      leaseNS,
		Identity:       id,
		Slots:          16,
		LeaseDuration:  4 * time.Second,
		RenewDeadline:  3 * time.Second,
		RetryPeriod:    500 * time.Millisecond,
		ClientSideOnly: clientSide,
		Logger:         log,
		Registerer:     reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.member = m
	f := informer.NewFactory(cfg, informer.FactoryOptions{Restrict: m.Shard, Logger: log, Registerer: reg})
	r.inf, err = informer.Of[*corev1.ConfigMap](f, informer.Scope{LabelSelector: "run=" + run})
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New[cache.Key](controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		r.mu.Lock()
		r.reconcile[k.String()]++
		r.mu.Unlock()
		r.note.Notify()
		return controller.Result{}, nil
	}), controller.Options[cache.Key]{Name: "cm-" + id, Logger: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(controller.For[*corev1.ConfigMap](r.inf)); err != nil {
		t.Fatal(err)
	}
	if err := sharding.Gate(m, c, nil, func() []cache.Key {
		var keys []cache.Key
		for _, o := range r.inf.Lister().List(nil) {
			keys = append(keys, cache.KeyOf(o))
		}
		return keys
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, run := range []func(context.Context) error{f.Start, c.Start, m.Start} {
		r.done.Go(func() {
			if err := run(ctx); err != nil {
				t.Errorf("replica %s: %v", id, err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	r.cancel()
	r.done.Wait()
}

// waitReconciled waits until every key of want was reconciled by one of
// rs since they last forgot.
func waitReconciled(t *testing.T, ctx context.Context, want map[string]bool, rs ...*replica) {
	t.Helper()
	for {
		ch := rs[0].note.Changed()
		missing := 0
		for k := range want {
			found := false
			for _, r := range rs {
				r.mu.Lock()
				found = found || r.reconcile[k] > 0
				r.mu.Unlock()
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%d keys never reconciled: %v", missing, context.Cause(ctx))
		}
	}
}

func (r *replica) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.reconcile)
}

// waitSettled waits until every replica is settled with n live members.
func waitSettled(t *testing.T, ctx context.Context, n int, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		for {
			ch := r.member.StatusChanged()
			st := r.member.Status()
			live := 0
			for _, m := range st.Members {
				if m.Live {
					live++
				}
			}
			if st.Settled && live == n {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("replica %s not settled with %d members: %v\n%s", r.id, n, context.Cause(ctx), st)
			}
		}
	}
}

// checkPartition checks that the replicas' caches and scopes split want
// between them, each holding exactly the objects of its active slots.
func checkPartition(t *testing.T, want map[string]bool, rs ...*replica) {
	t.Helper()
	seen := map[string]string{}
	taken := slots.New(16)
	for _, r := range rs {
		active := slots.New(16, r.member.Status().Active...)
		if active.Intersect(taken).Len() != 0 {
			t.Errorf("replica %s's active slots %s overlap another's", r.id, active)
		}
		taken = taken.Union(active)
		for _, o := range r.inf.Lister().List(nil) {
			k := cache.KeyOf(o).String()
			if prev, ok := seen[k]; ok {
				t.Errorf("%s cached by %s and %s", k, prev, r.id)
			}
			seen[k] = r.id
			if !active.Has(slots.Of(slots.Hash(o.Namespace), 16)) {
				t.Errorf("%s cached by %s outside its slots", k, r.id)
			}
		}
	}
	if taken.Len() != 16 {
		t.Errorf("active slots cover %d of 16", taken.Len())
	}
	for k := range want {
		if _, ok := seen[k]; !ok {
			t.Errorf("%s cached by no replica", k)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d objects cached, want %d", len(seen), len(want))
	}
}

func TestMember_ReplicasSplitTheObjectsAndHandOverWhenOneLeaves(t *testing.T) {
	env := cp.Env(t)
	for _, mode := range []struct {
		name       string
		clientSide bool
	}{{"server-side", false}, {"client-side", true}} {
		t.Run(mode.name, func(t *testing.T) {
			ctx := e2eContext(t, 120*time.Second, "replicas splitting ConfigMaps")
			cs := kubernetes.NewForConfigOrDie(env.Config)
			run := fmt.Sprintf("m%d", time.Now().UnixNano()%1e9)
			leaseNS := testenv.NewNamespace(t, cs, "leases")
			nss := makeConfigMaps(t, ctx, cs, run, 40)
			want := map[string]bool{}
			for i, ns := range nss {
				want[fmt.Sprintf("%s/cm-%d", ns, i)] = true
			}
			note := &await.Signal{}
			a := startReplica(t, env.Config, leaseNS, "a", run, mode.clientSide, note)
			b := startReplica(t, env.Config, leaseNS, "b", run, mode.clientSide, note)
			c := startReplica(t, env.Config, leaseNS, "c", run, mode.clientSide, note)
			waitSettled(t, ctx, 3, a, b, c)
			checkPartition(t, want, a, b, c)
			waitReconciled(t, ctx, want, a, b, c)
			for _, r := range []*replica{a, b, c} {
				group := run
				if got, want := metricstest.Value(t, r.reg, "kloop_shard_slots", "group", group, "state", "active"), float64(len(r.member.Status().Active)); got != want {
					t.Errorf("%s: kloop_shard_slots{state=active} = %v, want %v", r.id, got, want)
				}
				if got, want := metricstest.Value(t, r.reg, "kloop_shard_objects", "group", group), float64(r.inf.Status().Objects); got != want {
					t.Errorf("%s: kloop_shard_objects = %v, want %v", r.id, got, want)
				}
				if got := metricstest.Value(t, r.reg, "kloop_shard_members", "group", group); got != 3 {
					t.Errorf("%s: kloop_shard_members = %v, want 3", r.id, got)
				}
				if got := metricstest.Value(t, r.reg, "kloop_shard_handovers_total", "group", group, "direction", "in"); got < float64(len(r.member.Status().Active)) {
					t.Errorf("%s: kloop_shard_handovers_total{in} = %v, below its %d slots", r.id, got, len(r.member.Status().Active))
				}
			}
			// Every object was reconciled, by the replica that caches it.
			for _, r := range []*replica{a, b, c} {
				st := r.member.Status()
				for _, inf := range st.Informers {
					wantMode := "server"
					if mode.clientSide {
						wantMode = "client"
					}
					if inf.Filtering != wantMode {
						t.Errorf("replica %s informer %s: filtering %q, want %q", r.id, inf.Name, inf.Filtering, wantMode)
					}
				}
			}

			// c leaves: a and b take its slots and reconcile its objects;
			// nothing is cached twice.
			cKeys := map[string]bool{}
			for _, o := range c.inf.Lister().List(nil) {
				cKeys[cache.KeyOf(o).String()] = true
			}
			a.forget()
			b.forget()
			c.stop()
			waitSettled(t, ctx, 2, a, b)
			checkPartition(t, want, a, b)
			waitReconciled(t, ctx, cKeys, a, b)
		})
	}
}
