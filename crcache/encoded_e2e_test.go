package crcache_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kloopcache "github.com/kloop-dev/kloop/crcache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv/await"
)

// TestEncoded_ReadsAreTheCallersOwn: with kloop's encoded cache a read is
// decoded anew, but its label map is shared with the cache's label sets,
// so reads are deep copied there too: a change to a read must not reach
// the cache.
func TestEncoded_ReadsAreTheCallersOwn(t *testing.T) {
	f := newFixture(t)
	c, err := kloopcache.NewCacheWith(kloopcache.Options{Memory: informer.Memory{Encoded: true}})(f.cfg, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	await.Run(t, "cache", c.Start)
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	ctx := t.Context()
	key := client.ObjectKey{Namespace: f.ns2, Name: "test-pod-3"}
	var a corev1.Pod
	if err := c.Get(ctx, key, &a); err != nil {
		t.Fatal(err)
	}
	if a.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("Pod") || a.Labels["common-label"] != "common" {
		t.Fatalf("read %v with labels %v", a.GroupVersionKind(), a.Labels)
	}
	a.Labels["common-label"] = "changed"
	var b corev1.Pod
	if err := c.Get(ctx, key, &b); err != nil {
		t.Fatal(err)
	}
	if b.Labels["common-label"] != "common" {
		t.Error("changing a read changed the encoded cache")
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(f.ns2), client.MatchingLabels{"common-label": "common"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "test-pod-3" {
		t.Errorf("listed %v", podNames(pods.Items))
	}
}
