package crcache_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// TestDeleteSeenOnlyByARelist_IsADeletedFinalStateUnknown: a ConfigMap
// deleted while the cache's connection is cut, and whose watch cannot be
// resumed (etcd compacted), reaches a handler as client-go delivers such a
// delete: a cache.DeletedFinalStateUnknown with the last state known. On
// a control plane of its own, which it restarts.
func TestDeleteSeenOnlyByARelist_IsADeletedFinalStateUnknown(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	proxy := env.APIServerProxy(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, cs, "tomb")
	ctx := t.Context()
	for _, name := range []string{"keep", "gone"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startCache(t, proxy.RESTConfig(env.Config), cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}})
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	if _, err := inf.AddEventHandler(ev); err != nil {
		t.Fatal(err)
	}

	proxy.Set(testenv.Fault{Blackhole: true})
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CompactAndRestart(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Set(testenv.Fault{})

	dctx, cancel := context.WithTimeout(ctx, await.Timeout)
	defer cancel()
	for {
		select {
		case d := <-ev.deletes:
			tomb, ok := d.(toolscache.DeletedFinalStateUnknown)
			if !ok {
				t.Fatalf("the delete came as a %T; want a DeletedFinalStateUnknown, as from a relist", d)
			}
			cm, ok := tomb.Obj.(*corev1.ConfigMap)
			if tomb.Key != ns+"/gone" || !ok || cm.Name != "gone" {
				t.Fatalf("tombstone %q holds %#v", tomb.Key, tomb.Obj)
			}
			return
		case <-dctx.Done():
			t.Fatal("no delete reached the handler")
		}
	}
}
