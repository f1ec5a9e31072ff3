package crcache_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kloopcache "github.com/kloop-dev/kloop/crcache"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// fixture is what controller-runtime's cache suite sets up before each of
// its cases: three namespaces, six pods in them (each labelled
// test-label=<its name>, two of them also common-label=common) and two
// nodes. Its namespaces have names of their own, so that fixtures of
// several tests live side by side on the shared control plane.
type fixture struct {
	cfg           *rest.Config
	cs            kubernetes.Interface
	cl            client.Client
	ns1, ns2, ns3 string
	pods          map[string]*corev1.Pod // by name
	nodes         []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := controlPlane.Env(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	cl, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{cfg: env.Config, cs: cs, cl: cl, pods: map[string]*corev1.Pod{}}
	f.ns1 = f.namespace(t, "cr-one")
	f.ns2 = f.namespace(t, "cr-two")
	f.ns3 = f.namespace(t, "cr-three")
	common := map[string]string{"common-label": "common"}
	f.pod(t, "test-pod-1", f.ns1, corev1.RestartPolicyNever, nil)
	f.pod(t, "test-pod-2", f.ns2, corev1.RestartPolicyAlways, nil)
	f.pod(t, "test-pod-3", f.ns2, corev1.RestartPolicyOnFailure, common)
	f.pod(t, "test-pod-4", f.ns3, corev1.RestartPolicyNever, common)
	f.pod(t, "test-pod-5", f.ns1, corev1.RestartPolicyNever, nil)
	f.pod(t, "test-pod-6", f.ns2, corev1.RestartPolicyAlways, nil)
	for i := range 2 {
		name := fmt.Sprintf("%s-node-%d", f.ns1, i+1)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"name": name}}}
		if err := cl.Create(t.Context(), node); err != nil {
			t.Fatal(err)
		}
		f.nodes = append(f.nodes, node.Name)
	}
	return f
}

// namespace makes a namespace with the service account pods need (there is
// no controller manager to make it).
func (f *fixture) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := testenv.NewNamespace(t, f.cs, prefix)
	if _, err := f.cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func (f *fixture) pod(t *testing.T, name, ns string, restart corev1.RestartPolicy, extra map[string]string) *corev1.Pod {
	t.Helper()
	three := int64(3)
	labels := map[string]string{"test-label": name}
	for k, v := range extra {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			Containers:            []corev1.Container{{Name: "nginx", Image: "nginx"}},
			RestartPolicy:         restart,
			ActiveDeadlineSeconds: &three,
		},
	}
	if err := f.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	if _, ok := f.pods[name]; !ok {
		f.pods[name] = pod
	}
	return pod
}

// mine keeps the pods of the fixture's namespaces: other tests' pods share
// the control plane.
func (f *fixture) mine(pods []corev1.Pod) []corev1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool {
		return p.Namespace != f.ns1 && p.Namespace != f.ns2 && p.Namespace != f.ns3
	})
}

// startCache makes a cache with opts, runs it until the test ends and
// waits for it to sync.
func startCache(t *testing.T, cfg *rest.Config, opts cache.Options) cache.Cache {
	t.Helper()
	c, err := kloopcache.NewCache(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	await.Run(t, "cache", c.Start)
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	return c
}

// events is a ResourceEventHandler that records what it hears and
// signals each call.
type events struct {
	sig     await.Signal
	adds    chan client.Object
	updates chan client.Object
	deletes chan any
}

func newEvents() *events {
	return &events{adds: make(chan client.Object, 1000), updates: make(chan client.Object, 1000), deletes: make(chan any, 1000)}
}

func (e *events) OnAdd(obj any, _ bool) { e.adds <- obj.(client.Object); e.sig.Notify() }
func (e *events) OnUpdate(_, obj any)   { e.updates <- obj.(client.Object); e.sig.Notify() }
func (e *events) OnDelete(obj any)      { e.deletes <- obj; e.sig.Notify() }

var _ toolscache.ResourceEventHandler = (*events)(nil)

// startUnsyncable starts a cache with opts whose informers can never sync:
// it talks to the API server through a proxy that swallows everything
// (its REST mapper talks to the server directly). For the cases about a
// wait cut short, which would otherwise race a fast sync.
func startUnsyncable(t *testing.T, opts cache.Options) cache.Cache {
	t.Helper()
	env := controlPlane.Env(t)
	proxy := env.APIServerProxy(t)
	proxy.Set(testenv.Fault{Blackhole: true})
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Mapper, err = apiutil.NewDynamicRESTMapper(env.Config, hc); err != nil {
		t.Fatal(err)
	}
	return startCache(t, proxy.RESTConfig(env.Config), opts)
}

// receive waits for the object ns/name on ch, dropping others.
func receive(t *testing.T, what string, ch <-chan client.Object, ns, name string) client.Object {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), await.Timeout)
	defer cancel()
	for {
		select {
		case obj := <-ch:
			if obj.GetNamespace() == ns && obj.GetName() == name {
				return obj
			}
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
