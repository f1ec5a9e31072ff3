package sharding

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/internal/slots"
)

// Key is the object field whose hash places an object in a slot: the same
// field the API server hashes for a shard selector.
type Key uint8

const (
	// ByNamespace places every object of a namespace in one slot, so that a
	// controller's primary object and the objects it owns (which live in its
	// namespace) are cached and reconciled by the same replica. It is the
	// default. Its balance depends on the number of namespaces: with few
	// namespaces, or one much larger than the rest, the replicas' shares are
	// uneven. Cluster-scoped objects have no namespace; do not shard them by
	// namespace.
	ByNamespace Key = iota
	// ByUID places each object by its own UID: the most even spread, for
	// kinds a controller reconciles on their own. Objects with owners hash
	// by their own UID, not their owner's, so the informers of owned kinds
	// cannot be sharded by UID.
	ByUID
)

func (k Key) String() string {
	switch k {
	case ByNamespace:
		return "namespace"
	case ByUID:
		return "uid"
	}
	return fmt.Sprintf("Key(%d)", uint8(k))
}

// field is the field path of the key in a shard selector, such as
// "object.metadata.namespace".
func (k Key) field() string {
	if k == ByUID {
		return "object.metadata.uid"
	}
	return "object.metadata.namespace"
}

// value is the key's value for obj: its namespace or its UID.
func (k Key) value(obj metav1.Object) string {
	if k == ByUID {
		return string(obj.GetUID())
	}
	return obj.GetNamespace()
}

// parseKey reads Key.String's form.
func parseKey(s string) (Key, bool) {
	switch s {
	case "namespace":
		return ByNamespace, true
	case "uid":
		return ByUID, true
	}
	return 0, false
}

// selector is the shard selector for the objects whose key hashes into
// the slots of s.
func selector(k Key, s slots.Set) string { return slots.Selector(k.field(), s) }
