package kloop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
)

var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// ObjectsOptions' Namespace and ClusterScoped decide the scope of Objects' and
// Unstructured's informers, whatever the App's namespace; the same scope
// shares one informer.
func TestUnstructuredAndInNamespace_ScopeTheInformersWithoutARequest(t *testing.T) {
	app := newApp(t, kloop.Options{Namespace: "app-ns"})
	inApp, err := kloop.Unstructured(app, configMaps)
	if err != nil {
		t.Fatal(err)
	}
	inOther, err := kloop.Unstructured(app, configMaps, kloop.ObjectsOptions{Namespace: ptr.To("other")})
	if err != nil {
		t.Fatal(err)
	}
	everywhere, err := kloop.Unstructured(app, configMaps, kloop.ObjectsOptions{Namespace: ptr.To("")})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kloop.Unstructured(app, corev1.SchemeGroupVersion.WithResource("nodes"), kloop.ObjectsOptions{ClusterScoped: true, Namespace: ptr.To("ignored")})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := kloop.Unstructured(app, configMaps, kloop.ObjectsOptions{Namespace: ptr.To("other")})
	if again != inOther {
		t.Error("the same resource and scope made a second informer")
	}
	typed := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps, Namespace: ptr.To("other")})
	if err := typed.Err(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range app.Factory().Status() {
		names = append(names, s.Name)
	}
	got := strings.Join(names, "\n")
	for _, want := range []string{
		"configmaps.v1 (unstructured) [namespace=app-ns]",
		"configmaps.v1 (unstructured) [namespace=other]",
		"configmaps.v1 (unstructured) [all namespaces]",
		"nodes.v1 (unstructured) [all namespaces]",
		"configmaps.v1 [namespace=other]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("factory informers lack %q:\n%s", want, got)
		}
	}
	for _, inf := range []*informer.Informer[*unstructured.Unstructured]{inApp, everywhere, nodes} {
		if inf == nil {
			t.Error("nil informer without an error")
		}
	}
	if err := app.Err(); err != nil {
		t.Errorf("Err = %v after valid declarations", err)
	}
}

func TestUnstructured_WithoutAResourceNameIsADeclarationErrorRunReturns(t *testing.T) {
	app := newApp(t, kloop.Options{})
	inf, err := kloop.Unstructured(app, schema.GroupVersionResource{Group: "example.com", Version: "v1"})
	if inf != nil || err == nil || !strings.Contains(err.Error(), "name the resource") {
		t.Fatalf("Unstructured without a resource = %v, %v; want an error saying to name it", inf, err)
	}
	if err := app.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "kloop.Unstructured") {
		t.Errorf("Run = %v, want the declaration error", err)
	}
}

// On the real control plane: an unstructured informer of a namespace given
// with ObjectsOptions.Namespace sees that namespace's objects, not the App's.
func TestUnstructured_WatchesTheNamespaceInNamespaceNames(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	appNS := testenv.NewNamespace(t, kc, "unstructured-app")
	watched := testenv.NewNamespace(t, kc, "unstructured-watched")
	app, err := kloop.New(env.Config, kloop.Options{Namespace: appNS, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := kloop.Unstructured(app, configMaps, kloop.ObjectsOptions{Namespace: ptr.To(watched)})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 16)
	if _, err := inf.AddHandler(informer.HandlerFuncs[*unstructured.Unstructured]{
		AddFunc: func(obj *unstructured.Unstructured, _ bool) {
			seen <- obj.GetNamespace() + "/" + obj.GetName() + " " + obj.GetKind()
		},
	}, informer.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	runApp(t, app)
	ctx := t.Context()
	for _, ns := range []string{appNS, watched} {
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := watched + "/probe ConfigMap"
	deadline := time.After(60 * time.Second)
	for {
		select {
		case got := <-seen:
			if strings.HasPrefix(got, appNS+"/") {
				t.Fatalf("the informer of %s saw %s of the App's namespace", watched, got)
			}
			if got == want {
				// The App's namespace's probe was created first: an
				// informer watching it would hold it by now.
				if _, ok := inf.Lister().Get(appNS, "probe"); ok {
					t.Errorf("the cache holds %s/probe", appNS)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no add of %s within 60s", want)
		}
	}
}
