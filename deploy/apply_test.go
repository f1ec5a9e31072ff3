package deploy_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// fieldManager is the field manager of the test's applies.
const fieldManager = "kloop-deploy-test"

// applier applies objects by server-side apply, as `kubectl apply
// --server-side` does, with strict field validation.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t testing.TB, cfg *rest.Config) *applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{
		dyn:    dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
	}
}

// order puts namespaces and CRDs first, as kubectl does.
func order(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return out
}

func (a *applier) resource(t testing.TB, o *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
	}
	if m.Scope.Name() == "namespace" {
		if o.GetNamespace() == "" {
			t.Fatalf("%s %s is namespaced but the rendered object has no namespace", gvk.Kind, o.GetName())
		}
		return a.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	if o.GetNamespace() != "" {
		t.Fatalf("%s %s is cluster-scoped but the rendered object has namespace %q", gvk.Kind, o.GetName(), o.GetNamespace())
	}
	return a.dyn.Resource(m.Resource)
}

// apply applies every object and fails the test on the first error.
func (a *applier) apply(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range order(objs) {
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		// Not t.Context(): apply also restores roles in cleanups, when it is done.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = a.resource(t, o).Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager: fieldManager, Force: ptr.To(true), FieldValidation: "Strict",
		})
		cancel()
		if err != nil {
			t.Fatalf("server-side apply of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// get reads o back from the API server.
func (a *applier) get(t testing.TB, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := a.resource(t, o).Get(t.Context(), o.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read back %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return got
}

// missing lists the fields of want that got lacks or holds with another
// value (got may have more: defaults the API server filled in). Lists
// must have the same length and match element by element.
func missing(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %T", path, got)}
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if m, empty := wv.(map[string]any); !ok && empty && len(m) == 0 {
				continue // the API server drops empty maps (a Secret without data)
			}
			if !ok {
				out = append(out, path+"."+k+": missing")
				continue
			}
			out = append(out, missing(wv, gv, path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d elements, got %v", path, len(w), got)}
		}
		var out []string
		for i := range w {
			out = append(out, missing(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) && fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		return nil
	}
}

func describe(o *unstructured.Unstructured) string {
	return strings.TrimPrefix(o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName(), "/")
}
