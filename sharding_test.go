package kloop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/sharding"
)

func TestNew_ShardingRefusesLeaderElectionAndNeedsANamespace(t *testing.T) {
	_, err := kloop.New(unreachable, kloop.Options{
		Logger:         quiet(),
		Registry:       prometheus.NewRegistry(),
		Sharding:       &kloop.Sharding{Namespace: "ns"},
		LeaderElection: &kloop.LeaderElection{Namespace: "ns"},
	})
	if err == nil || !strings.Contains(err.Error(), "sharding replaces leader election") {
		t.Errorf("Sharding with LeaderElection: %v", err)
	}
	_, err = kloop.New(unreachable, kloop.Options{Logger: quiet(), Registry: prometheus.NewRegistry(), Sharding: &kloop.Sharding{}})
	if err == nil || !strings.Contains(err.Error(), "Sharding.Namespace") {
		t.Errorf("Sharding without a namespace: %v", err)
	}
	_, err = kloop.New(unreachable, kloop.Options{Logger: quiet(), Registry: prometheus.NewRegistry(), Sharding: &kloop.Sharding{Namespace: "ns", Group: "Not A Label"}})
	if err == nil || !strings.Contains(err.Error(), "Group") {
		t.Errorf("Sharding with a bad group: %v", err)
	}
}

func TestNewController_ShardedNeedsACacheKeyAndAForKind(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: foo.Scheme(), Sharding: &kloop.Sharding{Namespace: "ns"}})
	if app.Member() == nil || app.Member().Status().Key != sharding.ByNamespace {
		t.Fatal("no member, or not by namespace")
	}
	foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	deps := kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")})
	_, err := kloop.NewKeyedController(app, "strings", func(context.Context, string) (controller.Result, error) { return controller.Result{}, nil }).
		Watches(kloop.MapTo(deps, func(*appsv1.Deployment) []string { return nil })).Complete()
	if err == nil || !strings.Contains(err.Error(), "declare it with NewController and a cache.Key") {
		t.Errorf("a string-keyed sharded controller: %v", err)
	}
	_, err = kloop.NewController(app, "no-for", func(context.Context, cache.Key) (controller.Result, error) { return controller.Result{}, nil }).
		Watches(controller.Watches[*appsv1.Deployment, cache.Key](deps.Informer(), func(*appsv1.Deployment) []cache.Key { return nil })).Complete()
	if err == nil || !strings.Contains(err.Error(), "For kind") {
		t.Errorf("a sharded controller without For: %v", err)
	}
	if _, err := kloop.NewController(app, "foo", func(context.Context, cache.Key) (controller.Result, error) { return controller.Result{}, nil }).
		For(foos).Owns(deps).Complete(); err != nil {
		t.Errorf("the Foo controller, sharded: %v", err)
	}
	// A keyed controller that says where its keys are (as a fleet
	// controller's For does) is sharded like one with For.
	byNamespace := func(ns string) (string, string, bool) { return "", ns, true }
	if _, err := kloop.NewKeyedController(app, "per-namespace", func(context.Context, string) (controller.Result, error) { return controller.Result{}, nil }).
		Watches(kloop.MapTo(deps, func(d *appsv1.Deployment) []string { return []string{d.Namespace} })).
		Sharded(byNamespace, func() []string { return nil }).Complete(); err != nil {
		t.Errorf("a keyed controller with Sharded: %v", err)
	}
}

// A handle that stands for one out of reach (Unavailable) fails every
// read and write with its error, and MapTo of a failed handle fails the
// declaration at Complete.
func TestUnavailable_FailsEveryCallWithItsError(t *testing.T) {
	h := kloop.Unavailable[*appsv1.Deployment](errors.New("cluster east is not joined"))
	if _, err := h.Get(t.Context(), "ns", "n"); err == nil || err.Error() != "cluster east is not joined" {
		t.Errorf("Get = %v", err)
	}
	if _, err := h.List(t.Context(), "", nil); err == nil {
		t.Error("List did not fail")
	}
	if err := h.AddIndex("x", func(*appsv1.Deployment) []string { return nil }); err == nil {
		t.Error("AddIndex did not fail")
	}
	if h.Informer() != nil || h.Resource() != nil {
		t.Error("Informer or Resource is not nil")
	}
	app := newApp(t, kloop.Options{})
	_, err := kloop.NewKeyedController(app, "mapped", func(context.Context, string) (controller.Result, error) { return controller.Result{}, nil }).
		Watches(kloop.MapTo(h, func(*appsv1.Deployment) []string { return nil })).Complete()
	if err == nil || !strings.Contains(err.Error(), "cluster east is not joined") {
		t.Errorf("Complete with MapTo of a failed handle = %v, want its error", err)
	}
}
