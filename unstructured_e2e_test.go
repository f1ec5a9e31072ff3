package kloop_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// gizmoCRD is a kind no Go type of the program knows, installed while the
// App runs.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.runtime.kloop.dev
spec:
  group: runtime.kloop.dev
  names: {kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

var gizmoKind = schema.GroupVersionKind{Group: "runtime.kloop.dev", Version: "v1", Kind: "Gizmo"}

func gizmo(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gizmoKind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func specOf(t *testing.T, u *unstructured.Unstructured, field string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(u.Object, "spec", field)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Issue 38: a Handle on *unstructured.Unstructured for a kind named at run
// time (a CRD installed while the App runs) finds its resource and scope
// by discovery and does every write; its reads wait for its writes as a
// typed Handle's do.
func TestHandle_UnstructuredWritesEveryWayToACRDInstalledAtRunTime(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "gizmos")
	app, err := kloop.New(env.Config, kloop.Options{Name: "gizmo-writer", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	startApp(t, app)
	installCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(installCtx, env.Config, []byte(gizmoCRD)); err != nil {
		t.Fatal(err)
	}

	// The API server's discovery lists a new CRD shortly after it is
	// Established; it has no watch, so it is asked again on a short tick
	// (a bounded wait for the server, not for this program's goroutines).
	disc := kc.Discovery()
	await.Until(t, "discovery to list gizmos", func() <-chan struct{} {
		c := make(chan struct{})
		time.AfterFunc(50*time.Millisecond, func() { close(c) })
		return c
	}, func() bool {
		l, err := disc.ServerResourcesForGroupVersion(gizmoKind.GroupVersion().String())
		return err == nil && slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Kind == "Gizmo" })
	})

	gizmos := kloop.Objects[*unstructured.Unstructured](app, kloop.ObjectsOptions{Kind: gizmoKind})
	if err := gizmos.Err(); err != nil {
		t.Fatal(err)
	}
	if want := (schema.GroupVersionResource{Group: "runtime.kloop.dev", Version: "v1", Resource: "gizmos"}); gizmos.GVR() != want {
		t.Errorf("GVR = %v, want %v", gizmos.GVR(), want)
	}
	created, err := gizmos.Create(ctx, gizmo(ns, "g", map[string]any{"size": int64(1)}))
	if err != nil || created.GetUID() == "" {
		t.Fatalf("Create: %v, %v", created, err)
	}
	got, err := gizmos.Get(ctx, ns, "g")
	if err != nil || specOf(t, got, "size") != int64(1) {
		t.Fatalf("Get after Create: %v, %v; want size 1", got, err)
	}
	changed := got.DeepCopy()
	if err := unstructured.SetNestedField(changed.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := gizmos.Update(ctx, changed); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := gizmos.Patch(ctx, ns, "g", types.MergePatchType, []byte(`{"spec":{"color":"red"}}`), client.PatchOptions{}); err != nil {
		t.Fatalf("merge Patch: %v", err)
	}
	cfg := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g", "namespace": ns}, "spec": map[string]any{"size": int64(3)}}}
	if _, err := gizmos.Apply(ctx, client.ApplyConfigurationFromUnstructured(cfg), client.PatchOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "no kind") {
		t.Errorf("apply of an unstructured configuration without a kind: %v, want an error saying it has none", err)
	}
	cfg.SetAPIVersion("runtime.kloop.dev/v1")
	cfg.SetKind("Gizmo")
	applied, err := gizmos.Apply(ctx, client.ApplyConfigurationFromUnstructured(cfg), client.PatchOptions{Force: true})
	if err != nil || specOf(t, applied, "size") != int64(3) || specOf(t, applied, "color") != "red" {
		t.Fatalf("apply: %v, %v; want size 3 and color red kept", applied, err)
	}
	if mine := owned(t, applied, "gizmo-writer", metav1.ManagedFieldsOperationApply, ""); mine == nil {
		t.Errorf("managedFields %v: want gizmo-writer's Apply", applied.GetManagedFields())
	}
	withStatus := applied.DeepCopy()
	if err := unstructured.SetNestedField(withStatus.Object, true, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := gizmos.UpdateStatus(ctx, withStatus); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	cached, err := gizmos.Get(ctx, ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(withStatus.Object, int64(7), "status", "seen"); err != nil {
		t.Fatal(err)
	}
	withStatus.SetResourceVersion(cached.GetResourceVersion())
	if _, wrote, err := gizmos.WriteStatus(ctx, withStatus); err != nil || !wrote {
		t.Fatalf("WriteStatus of a changed status: wrote %v, %v; want written", wrote, err)
	}
	if _, err := gizmos.Get(ctx, ns, "g"); err != nil { // the cache has the write
		t.Fatal(err)
	}
	if _, wrote, err := gizmos.WriteStatus(ctx, withStatus); err != nil || wrote {
		t.Errorf("WriteStatus of the same status again: wrote %v, %v; want skipped", wrote, err)
	}
	got, err = gizmos.Get(ctx, ns, "g")
	if ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready"); err != nil || !ready || specOf(t, got, "size") != int64(3) {
		t.Fatalf("Get after the writes: %v, %v; want size 3 and status.ready", got, err)
	}
	list, err := gizmos.List(ctx, ns, nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %d gizmos, %v; want 1", len(list), err)
	}
	if listed, _, err := gizmos.Resource().List(ctx, ns, metav1.ListOptions{}); err != nil || len(listed) != 1 || listed[0].GetKind() != "Gizmo" {
		t.Fatalf("List from the API server: %v, %v; want the one Gizmo", listed, err)
	}
	if err := gizmos.Delete(ctx, ns, "g", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := gizmos.Get(ctx, ns, "g"); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete = %v, want NotFound", err)
	}
}

func TestObjects_UnstructuredOfAKindNotServedOrNotNamedIsAClearError(t *testing.T) {
	env := controlPlane.Env(t)
	app, err := kloop.New(env.Config, kloop.Options{Name: "nokind", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	missing := kloop.Objects[*unstructured.Unstructured](app, kloop.ObjectsOptions{Kind: schema.GroupVersionKind{Group: "nowhere.kloop.dev", Version: "v1", Kind: "Nothing"}})
	if err := missing.Err(); err == nil || !strings.Contains(err.Error(), "serves no resource of kind") || !strings.Contains(err.Error(), "Nothing") {
		t.Errorf("Err() = %v, want one saying no resource of kind Nothing is served", err)
	}
	if _, err := missing.Create(t.Context(), gizmo("default", "x", nil)); err == nil {
		t.Error("Create through a handle of a kind not served succeeded")
	}
	unnamed := kloop.Objects[*unstructured.Unstructured](app)
	if err := unnamed.Err(); err == nil || !strings.Contains(err.Error(), "ObjectsOptions{Kind") {
		t.Errorf("Err() without a kind = %v, want one asking for ObjectsOptions.Kind", err)
	}
}
