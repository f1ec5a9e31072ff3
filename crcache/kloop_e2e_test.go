package crcache_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kloop-dev/kloop/testenv/await"
)

// TestRefused_EndsTheWaitAtOnce: an informer the API server refuses (a
// user with no RBAC) ends WaitForCacheSync and reads at once, with the
// server's Forbidden, rather than at the caller's deadline.
func TestRefused_EndsTheWaitAtOnce(t *testing.T) {
	env := controlPlane.Env(t)
	cfg, err := env.UserConfig("crcache-nobody")
	if err != nil {
		t.Fatal(err)
	}
	c := startCache(t, cfg, cache.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), await.Timeout)
	defer cancel()
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	if c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync true for a refused informer")
	}
	if ctx.Err() != nil {
		t.Fatal("WaitForCacheSync waited for the deadline")
	}
	err = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "x"}, &corev1.ConfigMap{})
	if !apierrors.IsForbidden(err) || apierrors.IsTimeout(err) {
		t.Errorf("Get: %v, want Forbidden", err)
	}
	if ctx.Err() != nil {
		t.Error("Get waited for the deadline")
	}
}

// TestSyncPeriod_ReplaysTheCacheToHandlers: SyncPeriod is kloop's replay
// interval: a handler gets every cached object again as an update whose
// old and new object are the same.
func TestSyncPeriod_ReplaysTheCacheToHandlers(t *testing.T) {
	f := newFixture(t)
	period := 100 * time.Millisecond
	c := startCache(t, f.cfg, cache.Options{
		DefaultNamespaces: map[string]cache.Config{f.ns1: {}},
		SyncPeriod:        &period,
	})
	inf, err := c.GetInformer(t.Context(), &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	h := &replays{same: make(chan string, 100)}
	if _, err := inf.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	ctx, cancel := context.WithTimeout(t.Context(), await.Timeout)
	defer cancel()
	for len(got) < 2 {
		select {
		case name := <-h.same:
			got[name] = true
		case <-ctx.Done():
			t.Fatalf("replayed %v, want both pods of %s", got, f.ns1)
		}
	}
	if !got["test-pod-1"] || !got["test-pod-5"] {
		t.Errorf("replayed %v", got)
	}
}

type replays struct{ same chan string }

func (r *replays) OnAdd(any, bool) {}
func (r *replays) OnDelete(any)    {}
func (r *replays) OnUpdate(old, new any) {
	if old == new {
		select {
		case r.same <- new.(client.Object).GetName():
		default:
		}
	}
}

// TestMetrics_OnControllerRuntimesRegistry: the informers' metrics are
// registered where a manager serves its own.
func TestMetrics_OnControllerRuntimesRegistry(t *testing.T) {
	f := newFixture(t)
	c := startCache(t, f.cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns3: {}}})
	if _, err := c.GetInformer(t.Context(), &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kloop_informer_objects" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "namespace="+f.ns3) {
					return
				}
			}
		}
		t.Fatalf("kloop_informer_objects has no series of the pod informer of %s: %v", f.ns3, mf)
	}
	t.Fatal("no kloop_informer_objects on controller-runtime's registry")
}
