package kloop_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/kloopfake"
	"github.com/kloop-dev/kloop/testenv/await"
)

// An edge-triggered controller: its predicate compares the states before
// and after a change (cache.Event's Old and New), so that only a change of
// a ConfigMap's data reconciles it. Given to For through Where:
//
//	kloop.NewController(app, "reloader", r.Reconcile).For(configMaps.Where(dataChanged))
func ExampleHandle_Where() {
	dataChanged := func(e cache.Event[*corev1.ConfigMap]) bool {
		return e.Kind != cache.Updated || !maps.Equal(e.Old.Data, e.New.Data)
	}
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "a"}}
	relabelled := before.DeepCopy()
	relabelled.Labels = map[string]string{"team": "blue"}
	edited := before.DeepCopy()
	edited.Data["mode"] = "b"
	fmt.Println("labels changed:", dataChanged(cache.Event[*corev1.ConfigMap]{Kind: cache.Updated, Old: before, New: relabelled}))
	fmt.Println("data changed:", dataChanged(cache.Event[*corev1.ConfigMap]{Kind: cache.Updated, Old: before, New: edited}))
	fmt.Println("created:", dataChanged(cache.Event[*corev1.ConfigMap]{Kind: cache.Added, New: before}))
	// Output:
	// labels changed: false
	// data changed: true
	// created: true
}

// What docs/controllers.md says of transforms: a transform may add fields,
// and predicates, reads and handlers see what it returned; Objects makes
// an informer even for a kind the program only writes, and
// client.NewResource writes without one.
func TestTransform_AddsFieldsThatPredicatesAndReadsSee(t *testing.T) {
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"mode": "a"}}
	srv, err := kloopfake.NewServer(kloopfake.Options{Objects: []runtime.Object{seed}})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "transform", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app).WithTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["mode"] = cm.Data["mode"] // added by the transform
		return cm
	})
	secrets := kloop.Objects[*corev1.Secret](app) // only written below
	seen := make(chan string, 4)
	sawLabel := func(e cache.Event[*corev1.ConfigMap]) bool {
		select {
		case seen <- e.Object().Labels["mode"]:
		default:
		}
		return true
	}
	reconciled := make(chan string, 4)
	_, err = kloop.NewController(app, "transform", func(ctx context.Context, key cache.Key) (controller.Result, error) {
		cm, err := cms.Get(ctx, key.Namespace, key.Name)
		if err == nil {
			select {
			case reconciled <- cm.Labels["mode"]:
			default:
			}
		}
		return controller.Result{}, err
	}).For(cms.Where(sawLabel)).Complete()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if got := firstValue(t, "the predicate", seen); got != "a" {
		t.Errorf("the predicate saw label mode=%q, want %q: predicates see the transformed object", got, "a")
	}
	if got := firstValue(t, "the reconcile", reconciled); got != "a" {
		t.Errorf("the reconcile's Get read label mode=%q, want %q: reads see the transformed object", got, "a")
	}
	await.Closed(t, "the App's controllers", app.Ready())
	var secretsInformer bool
	for _, st := range app.Factory().Status() {
		if st.Resource == "secrets.v1" {
			secretsInformer = true
		}
	}
	if !secretsInformer {
		t.Errorf("no Secrets informer among %v: Objects makes one even for a kind only written", app.Factory().Status())
	}
	// Writes without an informer: client.NewResource on the App's client.
	n := len(app.Factory().Status())
	sa, err := client.NewResource[*corev1.ServiceAccount](app.Client(), schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "writer"}}); err != nil {
		t.Fatal(err)
	}
	if got := len(app.Factory().Status()); got != n {
		t.Errorf("a write through client.NewResource made an informer: %d informers, had %d", got, n)
	}
	if secrets.Err() != nil {
		t.Fatal(secrets.Err())
	}
}
