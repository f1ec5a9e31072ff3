package cache

import (
	"github.com/kloop-dev/kloop/watcher"
)

// IndexFunc computes the values under which an object is found in an index.
// It must be a pure function of the object: the store calls it when the
// object is stored and again, on the same object, when it is replaced or
// removed. It must not modify the object.
type IndexFunc[T watcher.Object] func(obj T) []string

// Names of the indexes the store knows without configuration, or that it
// offers ready-made index functions for.
const (
	// IndexNamespace is always present: ByIndex(IndexNamespace, ns) lists the
	// objects in namespace ns. It is not a separate map: the store keeps its
	// objects grouped by namespace.
	IndexNamespace = "namespace"
	// IndexLabel is the conventional name for LabelIndexFunc. When it is
	// configured, List and ListInNamespace use it for selectors that require
	// a label to equal a value.
	IndexLabel = "label"
	// IndexOwner is the conventional name for OwnerIndexFunc.
	IndexOwner = "owner"
)

// LabelIndexFunc indexes an object under "key=value" for each of its labels.
// Configure it as Options.Indexes[IndexLabel].
func LabelIndexFunc[T watcher.Object](obj T) []string {
	labels := obj.GetLabels()
	if len(labels) == 0 {
		return nil
	}
	out := make([]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, labelIndexValue(k, v))
	}
	return out
}

// labelIndexValue is the value LabelIndexFunc uses for the label key=value.
func labelIndexValue(key, value string) string { return key + "=" + value }

// OwnerIndexFunc indexes an object under the UID of each of its owner
// references, so ByIndex(IndexOwner, string(owner.GetUID())) returns what an
// owner owns. Configure it as Options.Indexes[IndexOwner].
func OwnerIndexFunc[T watcher.Object](obj T) []string {
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, string(r.UID))
	}
	return out
}

// index maps each value to the set of keys of the objects indexed under it.
// Only the writer modifies an index; readers hold the store's read lock.
type index[T watcher.Object] struct {
	fn     IndexFunc[T]
	values map[string]map[Key]struct{}
}

func newIndex[T watcher.Object](fn IndexFunc[T], sizeHint int) *index[T] {
	return &index[T]{fn: fn, values: make(map[string]map[Key]struct{}, sizeHint)}
}

func (ix *index[T]) add(k Key, obj T) {
	for _, v := range dedupe(ix.fn(obj)) {
		set := ix.values[v]
		if set == nil {
			set = make(map[Key]struct{}, 1)
			ix.values[v] = set
		}
		set[k] = struct{}{}
	}
}

func (ix *index[T]) remove(k Key, obj T) {
	for _, v := range ix.fn(obj) {
		set := ix.values[v]
		delete(set, k)
		if len(set) == 0 {
			delete(ix.values, v)
		}
	}
}

// update moves k from the values of old to those of new, touching only
// the values that differ: most updates change no indexed value.
func (ix *index[T]) update(k Key, old, new T) {
	before, after := ix.fn(old), ix.fn(new)
	if equalStrings(before, after) {
		return
	}
	for _, v := range before {
		if !contains(after, v) {
			set := ix.values[v]
			delete(set, k)
			if len(set) == 0 {
				delete(ix.values, v)
			}
		}
	}
	for _, v := range after {
		if !contains(before, v) {
			set := ix.values[v]
			if set == nil {
				set = make(map[Key]struct{}, 1)
				ix.values[v] = set
			}
			set[k] = struct{}{}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func dedupe(vs []string) []string {
	if len(vs) < 2 {
		return vs
	}
	out := vs[:0:0]
	for _, v := range vs {
		if !contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
