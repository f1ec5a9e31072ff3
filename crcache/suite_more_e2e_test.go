package crcache_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kloop-dev/kloop/testenv"
)

// TestSuite_RestrictToANamespace ports "should be able to restrict cache to
// a namespace" (by the per-kind setting and by DefaultNamespaces, for each
// class of object) and "... and to given selectors for non namespaced
// object": the namespaced kind holds one namespace's objects, cluster-scoped
// kinds stay readable, with any namespace in the key.
func TestSuite_RestrictToANamespace(t *testing.T) {
	f := newFixture(t)
	variants := map[string]cache.Options{
		"by the per-kind setting": {ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Namespaces: map[string]cache.Config{f.ns1: {}}}}},
		"by DefaultNamespaces":    {DefaultNamespaces: map[string]cache.Config{f.ns1: {}}},
	}
	for vname, opts := range variants {
		for _, class := range []string{"structured", "unstructured", "metadata"} {
			t.Run(vname+"/"+class, func(t *testing.T) {
				c := startCache(t, f.cfg, opts)
				ctx := t.Context()
				for range 2 {
					pods := newList(class, "Pod")
					if err := c.List(ctx, pods); err != nil {
						t.Fatal(err)
					}
					got := items(pods)
					if len(got) != 2 {
						t.Fatalf("listed %v, want the two pods of %s", names(got), f.ns1)
					}
					for _, p := range got {
						if p.GetNamespace() != f.ns1 {
							t.Errorf("listed %s/%s", p.GetNamespace(), p.GetName())
						}
					}
				}
				if class == "structured" {
					var nodes corev1.NodeList
					if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
						t.Errorf("nodes: %d, %v", len(nodes.Items), err)
					}
				}
				node := newNode(class)
				for _, ns := range []string{"", "random"} {
					if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: f.nodes[0]}, node); err != nil {
						t.Errorf("get node with namespace %q: %v", ns, err)
					}
				}
			})
		}
	}
	t.Run("and selectors for a cluster-scoped kind", func(t *testing.T) {
		c := startCache(t, f.cfg, cache.Options{
			DefaultNamespaces: map[string]cache.Config{f.ns1: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Node{}: {Label: labels.SelectorFromSet(labels.Set{"name": f.nodes[1]})}},
		})
		ctx := t.Context()
		pods := newList("metadata", "Pod")
		if err := c.List(ctx, pods); err != nil || len(items(pods)) != 2 {
			t.Errorf("pods: %v, %v", names(items(pods)), err)
		}
		node := newNode("metadata")
		for _, ns := range []string{"", "random"} {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: f.nodes[1]}, node); err != nil {
				t.Errorf("get the selected node with namespace %q: %v", ns, err)
			}
		}
		if err := c.Get(ctx, client.ObjectKey{Name: f.nodes[0]}, node); !apierrors.IsNotFound(err) {
			t.Errorf("get the other node: %v, want NotFound", err)
		}
	})
}

// TestSuite_CacheWithSelectors ports "Cache with selectors": a global field
// selector (namespace two) and another for one kind (namespace one).
func TestSuite_CacheWithSelectors(t *testing.T) {
	env := controlPlane.Env(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns1, ns2 := testenv.NewNamespace(t, cs, "sel-one"), testenv.NewNamespace(t, cs, "sel-two")
	for i, ns := range []string{ns1, ns2} {
		name := "test-" + string(rune('0'+i))
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "test-sa-" + name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "test-svc-" + name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startCache(t, env.Config, cache.Options{
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.namespace", ns2),
		ByObject:             map[client.Object]cache.ByObject{&corev1.ServiceAccount{}: {Field: fields.OneTermEqualSelector("metadata.namespace", ns1)}},
	})
	var sas corev1.ServiceAccountList
	if err := c.List(t.Context(), &sas); err != nil {
		t.Fatal(err)
	}
	if len(sas.Items) != 1 || sas.Items[0].Namespace != ns1 {
		t.Errorf("service accounts: %d, want one in %s", len(sas.Items), ns1)
	}
	var svcs corev1.ServiceList
	if err := c.List(t.Context(), &svcs); err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 || svcs.Items[0].Namespace != ns2 {
		t.Errorf("services: %d, want one in %s", len(svcs.Items), ns2)
	}
}

// TestIndexFieldDoesNotBlock ports the test of that name: IndexField on a
// running cache, for a kind whose informer has not synced, returns at once
// (here with a context already cancelled).
func TestIndexFieldDoesNotBlock(t *testing.T) {
	env := controlPlane.Env(t)
	c := startCache(t, env.Config, cache.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.IndexField(ctx, &corev1.Secret{}, "testField", func(client.Object) []string { return []string{"test-value"} }); err != nil {
		t.Errorf("IndexField: %v", err)
	}
}

func newNode(class string) client.Object {
	if class == "structured" {
		return &corev1.Node{}
	}
	return newObject(class, "Node")
}
