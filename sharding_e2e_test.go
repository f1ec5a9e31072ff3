package kloop_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
)

// Two Apps sharded by UID split the ConfigMaps their controller is For:
// each caches and reconciles only the ConfigMaps whose UIDs fall in its
// slots, and between them every ConfigMap is reconciled.
func TestApp_ShardedByUIDSplitsTheForKindBetweenReplicas(t *testing.T) {
	env := controlPlane.Env(t)
	ctx, cancel := context.WithTimeoutCause(t.Context(), 90*time.Second, fmt.Errorf("sharded Apps did not split the ConfigMaps in 90s"))
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "byuid")
	const n = 40
	for i := range n {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	type replica struct {
		app  *kloop.App
		cms  *kloop.Handle[*corev1.ConfigMap]
		mu   sync.Mutex
		seen map[string]bool
	}
	changed := make(chan struct{}, 1)
	var rs []*replica
	for _, id := range []string{"a", "b"} {
		app, err := kloop.New(env.Config, kloop.Options{
			Name:      "byuid",
			Namespace: ns,
			Logger:    quiet(),
			Registry:  prometheus.NewRegistry(),
			Sharding: &kloop.Sharding{
				Group: "byuid-" + ns, Identity: id, Key: sharding.ByUID, Slots: 16,
				LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{app: app, seen: map[string]bool{}}
		r.cms = kloop.Objects[*corev1.ConfigMap](app)
		if _, err := kloop.NewController(app, "byuid", func(ctx context.Context, k cache.Key) (controller.Result, error) {
			r.mu.Lock()
			r.seen[k.Name] = true
			r.mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
			return controller.Result{}, nil
		}).For(r.cms).Complete(); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(rctx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("replica %s: %v", id, err)
			}
		})
	}
	// Wait until both are settled with two members and every ConfigMap
	// was reconciled by one of them.
	for {
		settled, total := true, 0
		for _, r := range rs {
			st := r.app.Member().Status()
			live := 0
			for _, m := range st.Members {
				if m.Live {
					live++
				}
			}
			settled = settled && st.Settled && live == 2
			r.mu.Lock()
			total += len(r.seen)
			r.mu.Unlock()
		}
		if settled && total >= n {
			break
		}
		select {
		case <-changed:
		case <-rs[0].app.Member().StatusChanged():
		case <-rs[1].app.Member().StatusChanged():
		case <-ctx.Done():
			t.Fatalf("%v: %s\n%s", context.Cause(ctx), rs[0].app.Member().Status(), rs[1].app.Member().Status())
		}
	}
	cached := map[string]string{}
	for i, r := range rs {
		active := slots.New(16, r.app.Member().Status().Active...)
		objs, err := r.cms.List(ctx, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 0 || len(objs) == n {
			t.Errorf("replica %d caches %d of %d ConfigMaps, want a share", i, len(objs), n)
		}
		for _, o := range objs {
			if prev, ok := cached[o.Name]; ok {
				t.Errorf("%s cached by %s and replica %d", o.Name, prev, i)
			}
			cached[o.Name] = fmt.Sprint("replica ", i)
			if !active.Has(slots.Of(slots.Hash(string(o.UID)), 16)) {
				t.Errorf("replica %d caches %s outside its slots", i, o.Name)
			}
		}
	}
	if len(cached) != n {
		t.Errorf("%d of %d ConfigMaps cached by the replicas together", len(cached), n)
	}
}
