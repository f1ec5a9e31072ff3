package controller

import (
	"maps"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// Predicate decides whether an informer's event is worth enqueueing its
// keys. Every predicate given to a source must pass for the event to count.
// The event's objects are the cache's: read-only.
//
// Predicates are plain functions, so a generic one can be passed without
// naming its type argument: controller.For(inf, controller.GenerationChanged).
type Predicate[T watcher.Object] func(e cache.Event[T]) bool

// GenerationChanged passes an Update only when metadata.generation changed,
// which for most built-in and custom resources with a status subresource
// means the spec changed. Adds and Deletes pass.
//
// Objects that do not use generation (ConfigMaps, for example, keep it at 0)
// never pass an Update through this predicate.
func GenerationChanged[T watcher.Object](e cache.Event[T]) bool {
	if e.Kind != cache.Updated {
		return true
	}
	return e.Old.GetGeneration() != e.New.GetGeneration()
}

// resourceVersionChanged passes an Update only when the resourceVersion
// changed, which filters out periodic replays of an unchanged cache. Adds and
// Deletes pass.
func resourceVersionChanged[T watcher.Object](e cache.Event[T]) bool {
	if e.Kind != cache.Updated {
		return true
	}
	return e.Old.GetResourceVersion() != e.New.GetResourceVersion()
}

// LabelsChanged passes an Update only when the labels changed. Adds and
// Deletes pass.
func LabelsChanged[T watcher.Object](e cache.Event[T]) bool {
	if e.Kind != cache.Updated {
		return true
	}
	return !maps.Equal(e.Old.GetLabels(), e.New.GetLabels())
}

// AnnotationsChanged passes an Update only when the annotations changed.
// Adds and Deletes pass.
func AnnotationsChanged[T watcher.Object](e cache.Event[T]) bool {
	if e.Kind != cache.Updated {
		return true
	}
	return !maps.Equal(e.Old.GetAnnotations(), e.New.GetAnnotations())
}

// MatchLabels passes events for objects whose labels match sel. An Update
// passes when either the old or the new state matches, so that the
// controller also hears of an object leaving the selection. A nil sel matches
// everything.
func MatchLabels[T watcher.Object](sel labels.Selector) Predicate[T] {
	if sel == nil {
		sel = labels.Everything()
	}
	return func(e cache.Event[T]) bool {
		if sel.Matches(labels.Set(e.Object().GetLabels())) {
			return true
		}
		return e.Kind == cache.Updated && sel.Matches(labels.Set(e.Old.GetLabels()))
	}
}

// Filter passes events whose object satisfies keep: the new state for an
// Update, the last known state for a Delete.
func Filter[T watcher.Object](keep func(obj T) bool) Predicate[T] {
	return func(e cache.Event[T]) bool { return keep(e.Object()) }
}

// And passes an event when every predicate passes it (and when there are
// none). It stops at the first that does not.
func And[T watcher.Object](preds ...Predicate[T]) Predicate[T] {
	return func(e cache.Event[T]) bool {
		for _, p := range preds {
			if !p(e) {
				return false
			}
		}
		return true
	}
}

// Or passes an event when at least one predicate passes it (so never when
// there are none). It stops at the first that does.
func Or[T watcher.Object](preds ...Predicate[T]) Predicate[T] {
	return func(e cache.Event[T]) bool {
		for _, p := range preds {
			if p(e) {
				return true
			}
		}
		return false
	}
}

// Not passes an event exactly when p does not.
func Not[T watcher.Object](p Predicate[T]) Predicate[T] {
	return func(e cache.Event[T]) bool { return !p(e) }
}
