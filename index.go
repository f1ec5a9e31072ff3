package kloop

import (
	"context"
	"fmt"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// allNamespaces stands for every namespace in IndexValue: no namespace is
// named so (a namespace name is a DNS label).
const allNamespaces = "*"

// IndexValue is the value under which AddIndex keeps value for the objects
// of a namespaced kind in namespace, or in every namespace when namespace
// is "": what to give the handle's Informer().Lister().ByIndex, which does not scope
// values itself. Handle.ByIndex takes the namespace and value apart.
func IndexValue(namespace, value string) string {
	if namespace == "" {
		namespace = allNamespaces
	}
	return namespace + "/" + value
}

// AddIndex adds an index to the handle's cache, for ByIndex; add it before
// Run. A failure is also returned by Run.
//
// For a namespaced kind, as with controller-runtime's field indexes, each
// value fn returns is kept per namespace (IndexValue(obj's namespace,
// value)) and once for all namespaces (IndexValue("", value)), so that
// ByIndex answers within a namespace without scanning the others; fn
// returns values without the namespace. A cluster-scoped kind's values are
// kept as fn returns them.
func (h *Handle[T]) AddIndex(name string, fn cache.IndexFunc[T]) error {
	err := h.err
	if err == nil && fn == nil {
		err = fmt.Errorf("the index function is nil")
	}
	if err == nil {
		if h.namespaced {
			fn = scopedIndex(fn)
		}
		err = h.inf.AddIndex(name, fn)
	}
	if err != nil {
		err = fmt.Errorf("kloop: AddIndex %q on %s: %w", name, h.gvk.Kind, err)
		h.app.fail(err)
	}
	return err
}

// scopedIndex keeps each of fn's values per namespace and for all.
func scopedIndex[T watcher.Object](fn cache.IndexFunc[T]) cache.IndexFunc[T] {
	return func(obj T) []string {
		vals := fn(obj)
		if len(vals) == 0 {
			return nil
		}
		ns := obj.GetNamespace()
		out := make([]string, 0, 2*len(vals))
		for _, v := range vals {
			out = append(out, IndexValue("", v))
			if ns != "" {
				out = append(out, IndexValue(ns, v))
			}
		}
		return out
	}
}

// ByIndex returns the cached objects indexed under value in the named
// index (see AddIndex), in namespace ("" for all), after waiting for the
// cache's sync and this App's earlier writes in that namespace as List
// does. A cluster-scoped kind takes namespace "".
// Informer().Lister().ByIndex reads without waiting.
func (h *Handle[T]) ByIndex(ctx context.Context, namespace, index, value string) ([]T, error) {
	if err := h.readable(ctx); err != nil {
		return nil, err
	}
	if !h.namespaced && namespace != "" {
		return nil, fmt.Errorf("kloop: ByIndex %q on %s in namespace %q: %s is cluster-scoped; pass namespace \"\"", index, h.gvk.Kind, namespace, h.gvk.Kind)
	}
	if err := h.reader.WaitForWrites(ctx, namespace); err != nil {
		return nil, err
	}
	if h.namespaced {
		value = IndexValue(namespace, value)
	}
	return h.inf.Lister().ByIndex(index, value)
}
