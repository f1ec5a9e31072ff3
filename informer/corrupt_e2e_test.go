package informer_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
)

// An object whose data in etcd the API server cannot decode (KEP-3926) is
// removed with an unsafe delete. The watch then fails with an error event
// (500) instead of a DELETED; the informer must relist, so the object
// leaves the cache as a delete whose final state is unknown. Re-watching
// from the same resourceVersion would replay the failure for ever and keep
// the object cached.
//
// The API server runs without its watch cache, so that the watch is served
// straight from etcd and the error reaches the client as the server sends it.
func TestE2E_CorruptObjectDeletedUnsafelyLeavesTheCache(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env := testenv.StartT(t, testenv.Options{APIServerFlags: []string{"--watch-cache=false"}})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, cs, "corrupt")
	ctx := e2eContext(t, 90*time.Second, "corrupt object test")
	for _, name := range []string{"good", "corrupt"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	f := informer.NewFactory(env.Config, informer.FactoryOptions{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan bool, 1) // its finalStateUnknown
	if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		DeleteFunc: func(obj *corev1.ConfigMap, finalStateUnknown bool) {
			if obj.Name == "corrupt" {
				gone <- finalStateUnknown
			}
		},
	}, informer.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	runFactory(t, f)
	if err := f.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := inf.Lister().Get(ns, "corrupt"); !ok {
		t.Fatalf("corrupt not cached after sync")
	}

	// Garbage where the object's data belongs; then the unsafe delete that
	// KEP-3926 offers for such objects.
	if err := env.EtcdPut(ctx, "/registry/configmaps/"+ns+"/corrupt", []byte("not an object")); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "corrupt", metav1.GetOptions{}); err == nil {
		t.Fatalf("the API server still reads the corrupted object")
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "corrupt", metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: ptr.To(true)}); err != nil {
		t.Fatalf("unsafe delete of the corrupt object: %v", err)
	}

	select {
	case finalStateUnknown := <-gone:
		if !finalStateUnknown {
			t.Errorf("the corrupt object's delete came as a watch event; want it from a relist (FinalStateUnknown)")
		}
	case <-ctx.Done():
		t.Fatalf("the corrupt object never left the cache (last error: %v): %v", inf.Status().Source.LastError, context.Cause(ctx))
	}
	if _, ok := inf.Lister().Get(ns, "corrupt"); ok {
		t.Errorf("corrupt still cached after its delete was delivered")
	}
	if _, ok := inf.Lister().Get(ns, "good"); !ok {
		t.Errorf("good is missing from the cache after the relist")
	}

	// The watch goes on: a later change arrives.
	after, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Lister().WaitFor(ctx, cache.KeyOf(after), after.ResourceVersion); err != nil {
		t.Fatalf("a change after the relist did not reach the cache: %v", err)
	}
}
