package kloop_test

import "testing"

// For and Owns enqueue a cache.Key: they are methods of NewController's
// builder, whose reconcile takes a cache.Key, and of no other, so a
// controller of another key type that declares them does not compile.
func TestNewKeyedController_ForDoesNotCompile(t *testing.T) {
	src := `package x

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
)

func Declare(app *kloop.App, reconcile func(context.Context, string) (controller.Result, error)) {
	cms := kloop.Objects[*corev1.ConfigMap](app)
	kloop.NewKeyedController(app, "c", reconcile).BAD.Complete()
}
`
	wantCompileError(t, src, "Watches(kloop.MapTo(cms, func(cm *corev1.ConfigMap) []string { return []string{cm.Namespace} }))", "For(cms)",
		"has no field or method For")
}

// NewController takes a reconcile of a cache.Key; a controller of another
// key type is declared with NewKeyedController.
func TestNewController_AReconcileOfAnotherKeyTypeDoesNotCompile(t *testing.T) {
	src := `package x

import (
	"context"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

var _ cache.Key

func Declare(app *kloop.App) {
	kloop.NewController(app, "c", func(context.Context, BAD) (controller.Result, error) { return controller.Result{}, nil })
}
`
	wantCompileError(t, src, "cache.Key", "string", "in argument to kloop.NewController")
}
