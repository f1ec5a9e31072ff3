// Package ctxwait holds the waits of package testenv/await in the form
// kloop's own code and tests use where there is no testing.TB, or where a
// wait has a deadline of its own: each returns ctx's cause, with what it
// last saw, instead of failing a test. await's waits are these with
// await.Timeout and t.Fatalf.
package ctxwait

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// Watcher is await.Watcher: the Watch method of a client-go typed client.
type Watcher interface {
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Until is await.Until for code that has no testing.TB (a helper process,
// a goroutine that must not call t.Fatal): it returns ctx's cause when ctx
// ends before cond holds.
func Until(ctx context.Context, changed func() <-chan struct{}, cond func() bool) error {
	for {
		ch := changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Object is await.Object for code that has no testing.TB (a goroutine
// that must not call t.Fatal, a wait with a deadline of its own): it
// returns ctx's cause when ctx ends before cond holds, with the last state
// of the object it saw.
func Object[T runtime.Object](ctx context.Context, w Watcher, name string, cond func(T) bool) (T, error) {
	var zero T
	var lastErr error
	var last runtime.Object
	for {
		// No resourceVersion: the watch starts with the object's current
		// state as an Added event, then reports every change.
		wi, err := w.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			if ctx.Err() != nil {
				return zero, fmt.Errorf("%w (last error: %v; %s)", context.Cause(ctx), err, lastSeen(name, last))
			}
			// Nothing would tell when to try again: fail rather than
			// spin.
			return zero, fmt.Errorf("watch %s: %w", name, err)
		}
		obj, done, err := watchFor(ctx, wi, cond, &last)
		wi.Stop()
		if done {
			return obj, nil
		}
		if err != nil {
			lastErr = err
		}
		if ctx.Err() != nil {
			if lastErr != nil {
				return zero, fmt.Errorf("%w (last watch error: %v; %s)", context.Cause(ctx), lastErr, lastSeen(name, last))
			}
			return zero, fmt.Errorf("%w (%s)", context.Cause(ctx), lastSeen(name, last))
		}
	}
}

// lastSeenMax bounds how much of an object a failure message quotes.
const lastSeenMax = 4 << 10

// lastSeen says what a wait last saw of the object called name: its JSON
// (cut at lastSeenMax), that it was deleted, or that it never existed.
func lastSeen(name string, last runtime.Object) string {
	switch {
	case last == nil:
		return fmt.Sprintf("%s was never seen", name)
	case last == deleted:
		return fmt.Sprintf("%s was last seen deleted", name)
	}
	b, err := json.Marshal(last)
	if err != nil {
		return fmt.Sprintf("%s last seen as %T (%v)", name, last, err)
	}
	if len(b) > lastSeenMax {
		b = append(b[:lastSeenMax], "..."...)
	}
	return fmt.Sprintf("%s last seen as %s", name, b)
}

// deleted stands for "the object was deleted" in a wait's last state.
var deleted runtime.Object = &metav1.Status{Reason: "Deleted"}

// watchFor reads wi until cond holds (done), the watch ends or ctx does.
// It keeps the latest state in *last.
func watchFor[T runtime.Object](ctx context.Context, wi watch.Interface, cond func(T) bool, last *runtime.Object) (_ T, done bool, _ error) {
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
				*last = ev.Object
				if obj, ok := ev.Object.(T); ok && cond(obj) {
					return obj, true, nil
				}
			case watch.Deleted:
				*last = deleted
			case watch.Error:
				return zero, false, fmt.Errorf("watch error: %v", ev.Object)
			}
		}
	}
}

// Gone is await.Gone for code that has no testing.TB: it returns ctx's
// cause, with the object's last state, when ctx ends first.
func Gone(ctx context.Context, w Watcher, name string) error {
	var last runtime.Object
	for {
		// A watch that sends the current state first and then a bookmark
		// marking its end: without it, "no such object" would look the
		// same as "nothing happened yet".
		wi, err := w.Watch(ctx, metav1.ListOptions{
			FieldSelector:        fields.OneTermEqualSelector("metadata.name", name).String(),
			SendInitialEvents:    ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true,
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w (last error: %v; %s)", context.Cause(ctx), err, lastSeen(name, last))
			}
			return fmt.Errorf("watch %s: %w", name, err)
		}
		done, err := goneIn(ctx, wi, &last)
		wi.Stop()
		switch {
		case done:
			return nil
		case err != nil:
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("%w (%s)", context.Cause(ctx), lastSeen(name, last))
		}
	}
}

// goneIn reads wi until the object is known to be absent (done), the watch
// ends or ctx does.
func goneIn(ctx context.Context, wi watch.Interface, last *runtime.Object) (done bool, _ error) {
	exists, listed := false, false
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				exists, *last = true, ev.Object
			case watch.Deleted:
				if listed {
					return true, nil
				}
				exists, *last = false, deleted
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					listed = true
					if !exists {
						return true, nil
					}
				}
			case watch.Error:
				return false, fmt.Errorf("watch error: %v", ev.Object)
			}
		}
	}
}

// Watched is await.Watched for code that has no testing.TB.
func Watched(ctx context.Context, w Watcher, opts metav1.ListOptions, cond func(ctx context.Context) (bool, error)) error {
	for {
		wi, err := w.Watch(ctx, opts)
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		done, err := watchedFor(ctx, wi, cond)
		wi.Stop()
		if done || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// watchedFor checks cond once, then after each event of wi, until it holds
// (done), fails, or the watch or ctx ends.
func watchedFor(ctx context.Context, wi watch.Interface, cond func(ctx context.Context) (bool, error)) (done bool, _ error) {
	for {
		ok, err := cond(ctx)
		if ok || err != nil {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case _, open := <-wi.ResultChan():
			if !open {
				return false, nil
			}
		}
	}
}
