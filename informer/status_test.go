package informer

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/internal/watchtest"
	"github.com/kloop-dev/kloop/watcher"
)

func TestFactoryStatus_ReportsEachInformersSyncCountsErrorsAndHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		f := NewFactory(nil, FactoryOptions{
			Registerer: reg,
			Watch:      watcher.Options{InitialList: watcher.InitialListPaginated, Rand: func() float64 { return 0 }},
		})
		okLW, deniedLW := watchtest.New[*corev1.ConfigMap](), watchtest.New[*corev1.ConfigMap]()
		okLW.PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{cm("a", "1", "1"), cm("b", "2", "2")}, ResourceVersion: "5"}, nil)
		w := okLW.PushWatch()
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("RBAC: access denied"))
		deniedLW.PushList(watcher.ListPage[*corev1.ConfigMap]{}, forbidden)
		ok, err := OfListerWatcher(f, "configmaps", Scope{}, func(watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) { return okLW, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OfListerWatcher(f, "secrets", Scope{Namespace: "locked"}, func(watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) { return deniedLW, nil }); err != nil {
			t.Fatal(err)
		}
		// A handler that holds its first call, so its queue stays full.
		rec := newRecorder()
		rec.gate = make(chan struct{})
		add(t, ok, rec, HandlerOptions{Name: "held"})

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- f.Start(ctx) }()
		synctest.Wait()
		w.Modify(cm("a", "1", "6"))
		synctest.Wait()

		st := f.Status()
		if len(st) != 2 {
			t.Fatalf("Status() has %d informers, want 2", len(st))
		}
		good, bad := st[0], st[1]
		if good.Name != "configmaps [all namespaces]" || good.Resource != "configmaps" || good.Scope != (Scope{}) {
			t.Errorf("first informer named %q, resource %q, scope %+v", good.Name, good.Resource, good.Scope)
		}
		if !good.Synced || good.Objects != 2 || good.ResourceVersion != "6" || good.Source.Phase != watcher.PhaseWatching || good.Source.LastError != nil {
			t.Errorf("healthy informer: %+v; want synced, 2 objects at rv 6, watching, no error", good)
		}
		if good.Adds != 2 || good.Updates != 1 || good.Source.Snapshots != 1 {
			t.Errorf("healthy informer counted %d adds, %d updates, %d snapshots; want 2, 1, 1", good.Adds, good.Updates, good.Source.Snapshots)
		}
		// The held handler is in its first call: what follows waits.
		depth := metricstest.Value(t, reg, "kloop_informer_handler_queue_depth", "informer", good.Name, "handler", "held")
		if len(good.Handlers) != 1 || good.Handlers[0].Name != "held" || good.Handlers[0].Pending < 1 ||
			float64(good.Handlers[0].Pending) != depth || good.Handlers[0].Synced {
			t.Errorf("handlers = %+v; want one, \"held\", not synced, with the %v pending the metric says", good.Handlers, depth)
		}
		if bad.Synced || bad.Scope.Namespace != "locked" || !apierrors.IsForbidden(bad.Source.LastError) || bad.Source.Phase != watcher.PhaseWaiting {
			t.Errorf("refused informer: %+v; want not synced, in namespace locked, forbidden, waiting", bad)
		}
		close(rec.gate)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

func TestInformerStatus_ReportsTheLastErrorOfASourceWithoutPhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{Name: "cms"})
		defer h.stop()
		h.src.setErr(errors.New("connection refused"))
		s := h.inf.Status()
		if s.Name != "cms" || s.Synced || s.Source.LastError == nil || s.Source.Phase != watcher.PhaseStopped {
			t.Fatalf("Status() = %+v; want cms, not synced, the source's error", s)
		}
		h.src.relist("3", cm("a", "1", "3"))
		synctest.Wait()
		if s := h.inf.Status(); !s.Synced || s.Objects != 1 || s.ResourceVersion != "3" {
			t.Fatalf("after a snapshot Status() = %+v; want synced, 1 object at rv 3", s)
		}
	})
}

func TestInformerStatus_EstimatesTheCacheBytesAsTheGaugeDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{Name: "cms"})
		defer h.stop()
		if s := h.inf.Status(); s.CacheBytes != 0 {
			t.Fatalf("empty cache estimated at %d B", s.CacheBytes)
		}
		h.src.relist("3", cm("a", "1", "3"), cm("b", "2", "3"))
		synctest.Wait()
		s := h.inf.Status()
		// Each object is at least its ConfigMap struct (288 B).
		if s.CacheBytes < 2*288 || s.CacheBytes > 2*4096 {
			t.Fatalf("2 small ConfigMaps estimated at %d B, want a few hundred each", s.CacheBytes)
		}
		gauge := testutil.ToFloat64(h.inf.metrics.cacheBytes)
		if int64(gauge) != s.CacheBytes {
			t.Errorf("kloop_informer_cache_bytes %v, Status().CacheBytes %d: want the same", gauge, s.CacheBytes)
		}
	})
}
