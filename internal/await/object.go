package await

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
func Object[T runtime.Object](t testing.TB, what string, w Watcher, name string, cond func(T) bool) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	obj, err := ObjectContext(ctx, w, name, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return obj
}

// ObjectContext is Object for code that has no testing.TB: it returns
// ctx's cause when ctx ends before cond holds.
func ObjectContext[T runtime.Object](ctx context.Context, w Watcher, name string, cond func(T) bool) (T, error) {
	var zero T
	var lastErr error
	for {
		// No resourceVersion: the watch starts with the object's current
		// state as an Added event, then reports every change.
		wi, err := w.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			if ctx.Err() != nil {
				return zero, fmt.Errorf("%w (last error: %v)", context.Cause(ctx), err)
			}
			// Nothing would tell when to try again: fail rather than
			// spin.
			return zero, fmt.Errorf("watch %s: %w", name, err)
		}
		obj, done, err := watchFor(ctx, wi, cond)
		wi.Stop()
		if done {
			return obj, nil
		}
		if err != nil {
			lastErr = err
		}
		if ctx.Err() != nil {
			if lastErr != nil {
				return zero, fmt.Errorf("%w (last watch error: %v)", context.Cause(ctx), lastErr)
			}
			return zero, context.Cause(ctx)
		}
	}
}

// watchFor reads wi until cond holds (done), the watch ends or ctx does.
func watchFor[T runtime.Object](ctx context.Context, wi watch.Interface, cond func(T) bool) (_ T, done bool, _ error) {
	var zero T
	for {
		select {
		case <-ctx.Done():
			return zero, false, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return zero, false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if obj, ok := ev.Object.(T); ok && cond(obj) {
					return obj, true, nil
				}
			case watch.Error:
				return zero, false, fmt.Errorf("watch error: %v", ev.Object)
			}
		}
	}
}
