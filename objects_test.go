package kloop_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
)

// WithTransform takes a func(T) T of the handle's own T: a transform of
// another type is a compile error, not a mistake found by Run.
func TestHandle_WithTransformOfAnotherTypeDoesNotCompile(t *testing.T) {
	src := `package x

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop"
)

func Declare(app *kloop.App) {
	kloop.Objects[*corev1.ConfigMap](app).WithTransform(func(o BAD) BAD { return o })
}
`
	wantCompileError(t, src, "*corev1.ConfigMap", "*corev1.Pod", "in argument to kloop.Objects[*corev1.ConfigMap](app).WithTransform")
}

// The informer is shared by every handle on the same resource and scope:
// a second transform would undo the first, so it is a declaration error
// that Run returns.
func TestHandle_WithTransformTwiceOnASharedInformerIsADeclarationError(t *testing.T) {
	app := newApp(t, kloop.Options{})
	keep := func(cm *corev1.ConfigMap) *corev1.ConfigMap { return cm }
	first := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps}).WithTransform(keep)
	if err := first.Err(); err != nil {
		t.Fatalf("first WithTransform: %v", err)
	}
	second := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps}).WithTransform(keep)
	if err := second.Err(); !errors.Is(err, informer.ErrTransformSet) || !strings.Contains(err.Error(), "WithTransform") {
		t.Fatalf("second WithTransform: Err = %v, want ErrTransformSet naming WithTransform", err)
	}
	if err := app.Run(t.Context()); !errors.Is(err, informer.ErrTransformSet) {
		t.Errorf("Run = %v, want the declaration error", err)
	}
}
