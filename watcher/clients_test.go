package watcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/watcher"
)

var cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// captureClient is a TypedClient that records the options it is called with.
type captureClient struct {
	list      *corev1.ConfigMapList
	listOpts  metav1.ListOptions
	watchOpts metav1.ListOptions
}

func (c *captureClient) List(_ context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	c.listOpts = opts
	return c.list, nil
}

func (c *captureClient) Watch(_ context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	c.watchOpts = opts
	return apiwatch.NewEmptyWatch(), nil
}

func TestFromClient_AddsSelectorsAndKeepsTheReflectorsOptions(t *testing.T) {
	c := &captureClient{list: &corev1.ConfigMapList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"},
		Items:    []corev1.ConfigMap{*obj("a", "40"), *obj("b", "41")},
	}}
	lw := watcher.FromClient[*corev1.ConfigMap](c, watcher.Scope{LabelSelector: "app=web", FieldSelector: "metadata.name!=x"})

	p, err := lw.List(t.Context(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.listOpts; o.LabelSelector != "app=web" || o.FieldSelector != "metadata.name!=x" || o.ResourceVersion != "0" || o.Limit != 500 {
		t.Fatalf("list options = %+v", o)
	}
	if p.ResourceVersion != "42" || p.Continue != "next" || len(p.Items) != 2 || p.Items[0].Name != "a" || p.Items[1].ResourceVersion != "41" {
		t.Fatalf("page = %+v", p)
	}
	// Items are copies: they do not alias the response's array.
	p.Items[0].Name = "changed"
	if c.list.Items[0].Name != "a" {
		t.Fatalf("the returned item aliases the list's Items array")
	}

	w, err := lw.Watch(t.Context(), metav1.ListOptions{ResourceVersion: "42", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if o := c.watchOpts; o.LabelSelector != "app=web" || o.FieldSelector != "metadata.name!=x" || o.ResourceVersion != "42" || !o.AllowWatchBookmarks {
		t.Fatalf("watch options = %+v", o)
	}
}

func TestFromClient_WorksWithAClientsetAndItsSelectors(t *testing.T) {
	web := obj("web", "")
	web.Labels = map[string]string{"app": "web"}
	cs := fake.NewClientset(web, obj("db", ""))
	lw := watcher.FromClient[*corev1.ConfigMap](cs.CoreV1().ConfigMaps("ns"), watcher.Scope{LabelSelector: "app=web"})
	p, err := lw.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].Name != "web" {
		t.Fatalf("items = %v, want only the labelled one", p.Items)
	}
}

func TestFromClient_PanicsOnMisuse(t *testing.T) {
	for name, f := range map[string]func(){
		"namespace in options": func() {
			watcher.FromClient[*corev1.ConfigMap](fake.NewClientset().CoreV1().ConfigMaps("ns"), watcher.Scope{Namespace: "ns"})
		},
		"list of another type": func() {
			watcher.FromClient[*corev1.Secret](fake.NewClientset().CoreV1().ConfigMaps("ns"), watcher.Scope{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "watcher.FromClient") {
					t.Fatalf("recovered %v, want a watcher.FromClient panic", r)
				}
			}()
			f()
		})
	}
}

func TestFromClient_OverADynamicClientListsAndWatchesUnstructuredInANamespace(t *testing.T) {
	u := func(ns, name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace(ns)
		o.SetName(name)
		return o
	}
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{cmGVR: "ConfigMapList"}, u("ns", "a"), u("other", "b"))
	lw := watcher.FromClient[*unstructured.Unstructured](c.Resource(cmGVR).Namespace("ns"), watcher.Scope{})
	p, err := lw.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].GetName() != "a" {
		t.Fatalf("items = %v, want only ns/a", p.Items)
	}
	w, err := lw.Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.Resource(cmGVR).Namespace("ns").Create(t.Context(), u("ns", "c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fake may first replay what exists; wait for the create.
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || o.GetNamespace() != "ns" {
				t.Fatalf("event %s %T %v, want unstructured objects of namespace ns", ev.Type, ev.Object, ev.Object)
			}
			if ev.Type == apiwatch.Added && o.GetName() == "c" {
				return
			}
		case <-timeout:
			t.Fatal("no Added event for ns/c within 10s after creating it")
		}
	}
}

func TestFromClient_OverAMetadataClientListsPartialObjectMetadata(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	m := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		}
	}
	c := metadatafake.NewSimpleMetadataClient(scheme, m("a"), m("b"))
	lw := watcher.FromClient[*metav1.PartialObjectMetadata](c.Resource(cmGVR).Namespace("ns"), watcher.Scope{})
	p, err := lw.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 2 || p.Items[0] == p.Items[1] {
		t.Fatalf("items = %v, want two distinct objects", p.Items)
	}
}

func TestForResource_RejectsATypeTheSchemeDoesNotKnowAtThatVersion(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	_, err := watcher.FromResource[*corev1.ConfigMap](cfg, runtime.NewScheme(), cmGVR, watcher.Scope{})
	if err == nil {
		t.Fatal("an empty scheme was accepted")
	}
	_, err = watcher.FromResource[*corev1.ConfigMap](cfg, kscheme.Scheme, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "configmaps"}, watcher.Scope{})
	if err == nil || !strings.Contains(err.Error(), "does not register") {
		t.Fatalf("wrong group accepted or unclear error: %v", err)
	}
	if _, err := watcher.FromResource[*corev1.ConfigMap](cfg, kscheme.Scheme, cmGVR, watcher.Scope{}); err != nil {
		t.Fatalf("ConfigMaps with the client-go scheme: %v", err)
	}
}
