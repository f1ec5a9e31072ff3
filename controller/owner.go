package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
)

// controllerOwnerKey returns the key of obj's controller owner (the owner
// reference with controller: true) when that owner has the given group and
// kind. The version in the reference's apiVersion is ignored, so an owner
// served under several versions still matches. ok is false when obj has no
// controller owner, or its controller owner is of another group or kind.
//
// Owner references name an owner in the same namespace as obj (or a
// cluster-scoped one, for which the key's namespace would be wrong); the key
// returned is obj's namespace and the owner's name.
func controllerOwnerKey(obj metav1.Object, owner schema.GroupKind) (key cache.Key, ok bool) {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		ref := &refs[i]
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		// An object has at most one controller owner; the API server
		// rejects a second.
		if ref.Kind != owner.Kind || apiGroup(ref.APIVersion) != owner.Group {
			return cache.Key{}, false
		}
		return cache.Key{Namespace: obj.GetNamespace(), Name: ref.Name}, true
	}
	return cache.Key{}, false
}

// apiGroup returns the group of an apiVersion: "" for "v1", "apps" for
// "apps/v1". A malformed apiVersion yields a group no owner has.
func apiGroup(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "\x00invalid"
	}
	return gv.Group
}
