package await

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kloop-dev/kloop/internal/ctxwait"
)

// Watcher is what Object needs of a client: the Watch method every
// client-go typed client has, for example kubernetes.Interface's
// CoreV1().ConfigMaps(namespace) or an apiextensions clientset's
// ApiextensionsV1().CustomResourceDefinitions().
type Watcher interface {
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Object waits until cond holds for the object called name that w serves,
// and returns that state of it. cond sees the object as it is when the wait
// starts (if it exists) and then every change the API server reports, in
// a watch that is opened again if it ends; it is never called for a delete.
// Object fails t, naming what, if cond does not hold within Timeout.
func Object[T runtime.Object](t TB, what string, w Watcher, name string, cond func(T) bool) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	obj, err := ctxwait.Object(ctx, w, name, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return obj
}

// Gone waits until the object called name that w serves does not exist:
// at once if there is none, else when the API server reports its delete
// (after its finalizers, if it has any, are removed). It fails t, naming
// what and with the object's last state, if that takes longer than
// Timeout.
func Gone(t TB, what string, w Watcher, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	if err := ctxwait.Gone(ctx, w, name); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Watched waits until cond holds, checking it at once and again after every
// event of a watch w opens with opts (opened again if it ends). It is for
// API server state that cond reads itself, such as a List, and that
// changes only with the objects watched: the watch is opened before the
// first check, so no change is missed. Watched fails t, naming what, if
// cond does not hold within Timeout; an error from cond ends the wait with
// it.
func Watched(t TB, what string, w Watcher, opts metav1.ListOptions, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	if err := ctxwait.Watched(ctx, w, opts, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
