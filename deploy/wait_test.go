package deploy_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

var (
	foosGVR        = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	eventsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// waitFor watches the objects of gvr in ns until one satisfies cond, for
// at most 60 s, and returns it. what says in the failure what never came.
func waitFor(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ri := dyn.Resource(gvr).Namespace(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	}
	var found *unstructured.Unstructured
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted && cond(u) {
			found = u
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s within 60s: %v", what, err)
	}
	return found
}
