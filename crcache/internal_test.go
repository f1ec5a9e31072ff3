package crcache

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kloop-dev/kloop/cache"
)

func TestNew_RefusesOptionsItCannotHonour(t *testing.T) {
	no := false
	cases := map[string]struct {
		opts crcache.Options
		want string
	}{
		"NewInformer": {crcache.Options{NewInformer: func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
			return nil
		}}, "Options.NewInformer"},
		"DefaultWatchErrorHandler": {crcache.Options{DefaultWatchErrorHandler: func(context.Context, *toolscache.Reflector, error) {}}, "Options.DefaultWatchErrorHandler"},
		"bookmarks off":            {crcache.Options{DefaultEnableWatchBookmarks: &no}, "DefaultEnableWatchBookmarks=false"},
		"bookmarks off by object":  {crcache.Options{ByObject: map[client.Object]crcache.ByObject{&corev1.Pod{}: {EnableWatchBookmarks: &no}}}, "ByObject[*v1.Pod].EnableWatchBookmarks=false"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, tc.opts, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// staticMapper knows pods (namespaced) and nodes (cluster-scoped).
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	return m
}

func TestResolve_FollowsControllerRuntimesPrecedence(t *testing.T) {
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	node := corev1.SchemeGroupVersion.WithKind("Node")
	global := labels.SelectorFromSet(labels.Set{"global": "x"})
	perNS := labels.SelectorFromSet(labels.Set{"ns": "x"})
	perType := labels.SelectorFromSet(labels.Set{"type": "x"})
	s, err := resolve(crcache.Options{
		Scheme:               scheme.Scheme,
		Mapper:               staticMapper(),
		DefaultLabelSelector: global,
		DefaultNamespaces: map[string]crcache.Config{
			"a":                 {LabelSelector: perNS},
			"b":                 {},
			metav1.NamespaceAll: {},
		},
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Pod{}:  {Label: perType},
			&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", "n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pods := s.configsFor(pod, true)
	// The namespace's own selector wins over the type's, the type's over
	// the global one.
	if got := pods["a"].LabelSelector.String(); got != "ns=x" {
		t.Errorf("pods in a: %s", got)
	}
	if got := pods["b"].LabelSelector.String(); got != "type=x" {
		t.Errorf("pods in b: %s", got)
	}
	// The all-namespaces entry leaves out the namespaces named.
	if got := pods[""].FieldSelector.String(); got != "metadata.namespace!=a,metadata.namespace!=b" {
		t.Errorf("pods in all others: field %s", got)
	}
	nodes := s.configsFor(node, false)
	if len(nodes) != 1 || nodes[""].FieldSelector.String() != "metadata.name=n" || nodes[""].LabelSelector.String() != "global=x" {
		t.Errorf("nodes: %+v", nodes)
	}
	cms := s.configsFor(corev1.SchemeGroupVersion.WithKind("ConfigMap"), true)
	if len(cms) != 3 || cms["b"].LabelSelector.String() != "global=x" {
		t.Errorf("config maps: %+v", cms)
	}
}

func TestResolve_ClusterScopedWithNamespacesIsAnError(t *testing.T) {
	_, err := resolve(crcache.Options{
		Scheme:   scheme.Scheme,
		Mapper:   staticMapper(),
		ByObject: map[client.Object]crcache.ByObject{&corev1.Node{}: {Namespaces: map[string]crcache.Config{"a": {}}}},
	})
	if err == nil {
		t.Error("no error")
	}
}

type recorded struct {
	adds    []bool
	updates int
	deletes []any
}

func (r *recorded) OnAdd(_ any, initial bool) { r.adds = append(r.adds, initial) }
func (r *recorded) OnUpdate(_, _ any)         { r.updates++ }
func (r *recorded) OnDelete(obj any)          { r.deletes = append(r.deletes, obj) }

func TestDeliver_AsClientGoDelivers(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	var r recorded
	deliver(&r, cache.Event[client.Object]{Kind: cache.Added, New: pod, Replay: true})
	deliver(&r, cache.Event[client.Object]{Kind: cache.Added, New: pod})
	deliver(&r, cache.Event[client.Object]{Kind: cache.Updated, Old: pod, New: pod})
	deliver(&r, cache.Event[client.Object]{Kind: cache.Deleted, Old: pod})
	deliver(&r, cache.Event[client.Object]{Kind: cache.Deleted, Old: pod, FinalStateUnknown: true})
	if len(r.adds) != 2 || !r.adds[0] || r.adds[1] {
		t.Errorf("adds (isInInitialList): %v, want [true false]", r.adds)
	}
	if r.updates != 1 {
		t.Errorf("updates: %d", r.updates)
	}
	if len(r.deletes) != 2 {
		t.Fatalf("deletes: %v", r.deletes)
	}
	if r.deletes[0] != client.Object(pod) {
		t.Errorf("a seen delete delivered %T", r.deletes[0])
	}
	tomb, ok := r.deletes[1].(toolscache.DeletedFinalStateUnknown)
	if !ok || tomb.Key != "ns/p" || tomb.Obj != client.Object(pod) {
		t.Errorf("an inferred delete delivered %#v, want a DeletedFinalStateUnknown for ns/p", r.deletes[1])
	}
}
