package crcache_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kloop-dev/kloop/testenv"
)

// TestPods_ReplicasShareTheirTemplateInTheCacheAndReadsAreCopies: the
// cache holds what replicas of one template share once (their env, here),
// and a read (a deep copy, as controller-runtime's cache gives) is the
// caller's own: changing it changes neither the cache nor the other
// replica, and it reads back equal to the server's object.
func TestPods_ReplicasShareTheirTemplateInTheCacheAndReadsAreCopies(t *testing.T) {
	env := controlPlane.Env(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, cs, "cr-shared")
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("replica-%d", i), Namespace: ns, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/web:v1",
				Env: []corev1.EnvVar{{Name: "MODE", Value: "serve"}, {Name: "LEVEL", Value: "info"}},
			}}},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startCache(t, env.Config, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}})
	get := func(name string, opts ...client.GetOption) *corev1.Pod {
		t.Helper()
		var p corev1.Pod
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &p, opts...); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	cached0, cached1 := get("replica-0", client.UnsafeDisableDeepCopy), get("replica-1", client.UnsafeDisableDeepCopy)
	if &cached0.Spec.Containers[0].Env[0] != &cached1.Spec.Containers[0].Env[0] {
		t.Fatal("the cached replicas do not share their env")
	}

	read := get("replica-0")
	if &read.Spec.Containers[0].Env[0] == &cached0.Spec.Containers[0].Env[0] {
		t.Fatal("a read shares its env with the cache, want a deep copy")
	}
	server, err := cs.CoreV1().Pods(ns).Get(t.Context(), "replica-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(read.Spec, server.Spec) || !equality.Semantic.DeepEqual(read.Labels, server.Labels) || read.UID != server.UID {
		t.Errorf("the cached pod reads back other than the server's:\n cache  %+v\n server %+v", read.Spec, server.Spec)
	}
	read.Spec.Containers[0].Env[0].Value = "changed"
	for _, p := range []*corev1.Pod{cached0, cached1, get("replica-0"), get("replica-1")} {
		if v := p.Spec.Containers[0].Env[0].Value; v != "serve" {
			t.Errorf("%s reads MODE=%q after a read was changed, want serve", p.Name, v)
		}
	}
}
