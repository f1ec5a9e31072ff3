package kloop

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// AlreadyControlledError is SetControllerReference's error for an object
// that another owner controls already: an object has at most one
// controller.
type AlreadyControlledError struct {
	// Object is the object's kind-less namespace/name.
	Object string
	// Controller is its present controller reference.
	Controller metav1.OwnerReference
}

func (e *AlreadyControlledError) Error() string {
	return fmt.Sprintf("kloop: %s is already controlled by %s %s %s (uid %s): an object has one controller; remove that reference first, or use SetOwnerReference for a non-controller reference",
		e.Object, e.Controller.APIVersion, e.Controller.Kind, e.Controller.Name, e.Controller.UID)
}

// SetControllerReference makes owner the controller of obj, in obj's
// metadata only (write obj to store it): an owner reference with
// controller and blockOwnerDeletion true, so that the garbage collector
// deletes obj after owner, a foreground deletion of owner waits for obj,
// and Owns maps obj's changes to owner. owner's kind comes from the App's
// scheme, since objects read from a cache have no TypeMeta.
//
// A reference to the same owner (same group, kind and name) is updated in
// place. It is an *AlreadyControlledError if another owner controls obj,
// and an error if owner is not a registered kind, has no name or UID
// (it was not read from the API server), or is namespaced while obj is in
// another namespace or cluster-scoped: the garbage collector would treat
// such a reference as pointing at a missing owner and delete obj.
func (a *App) SetControllerReference(owner, obj metav1.Object) error {
	ref, err := a.ownerRef(owner, obj)
	if err != nil {
		return err
	}
	ref.Controller, ref.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	refs := obj.GetOwnerReferences()
	if c := metav1.GetControllerOfNoCopy(obj); c != nil && !sameOwner(*c, ref) {
		return &AlreadyControlledError{Object: objectName(obj), Controller: *c}
	}
	obj.SetOwnerReferences(upsertRef(refs, ref, nil))
	return nil
}

// SetOwnerReference adds owner to obj's owner references (in obj's
// metadata only), not as its controller: the garbage collector deletes obj
// once all its owners are gone. A reference to the same owner (same group,
// kind and name) is updated in place and keeps its controller and
// blockOwnerDeletion flags. Its errors are SetControllerReference's, but
// for another controller, which does not matter here.
func (a *App) SetOwnerReference(owner, obj metav1.Object) error {
	ref, err := a.ownerRef(owner, obj)
	if err != nil {
		return err
	}
	obj.SetOwnerReferences(upsertRef(obj.GetOwnerReferences(), ref, func(old metav1.OwnerReference) metav1.OwnerReference {
		ref.Controller, ref.BlockOwnerDeletion = old.Controller, old.BlockOwnerDeletion
		return ref
	}))
	return nil
}

// ObjectReference returns a reference to obj (apiVersion, kind, namespace,
// name, uid, resourceVersion), for an event or a status field that points
// at an object, with the kind from the App's scheme. obj must be a kind
// the scheme registers.
func (a *App) ObjectReference(obj metav1.Object) (corev1.ObjectReference, error) {
	gvk, err := a.kindOf(obj, "ObjectReference")
	if err != nil {
		return corev1.ObjectReference{}, err
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return corev1.ObjectReference{
		APIVersion:      apiVersion,
		Kind:            kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
	}, nil
}

// ownerRef checks owner and obj and returns owner's reference, without
// flags.
func (a *App) ownerRef(owner, obj metav1.Object) (metav1.OwnerReference, error) {
	if obj == nil {
		return metav1.OwnerReference{}, fmt.Errorf("kloop: owner reference: the owned object is nil")
	}
	gvk, err := a.kindOf(owner, "owner reference")
	if err != nil {
		return metav1.OwnerReference{}, err
	}
	if owner.GetName() == "" || owner.GetUID() == "" {
		return metav1.OwnerReference{}, fmt.Errorf("kloop: owner reference to %s %q: the owner has no name or UID; pass the owner as read from the API server or a cache", gvk.Kind, owner.GetName())
	}
	// The garbage collector's rules: a namespaced owner owns only objects
	// of its own namespace.
	if ons := owner.GetNamespace(); ons != "" {
		switch ns := obj.GetNamespace(); {
		case ns == "":
			return metav1.OwnerReference{}, fmt.Errorf("kloop: owner reference on %s: a cluster-scoped object cannot be owned by %s %s/%s, which is namespaced", objectName(obj), gvk.Kind, ons, owner.GetName())
		case ns != ons:
			return metav1.OwnerReference{}, fmt.Errorf("kloop: owner reference on %s: an object cannot be owned by %s %s/%s in another namespace (owner references do not cross namespaces)", objectName(obj), gvk.Kind, ons, owner.GetName())
		}
	}
	return metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Name:       owner.GetName(),
		UID:        owner.GetUID(),
	}, nil
}

// kindOf returns obj's kind from the App's scheme; for a type registered
// under several versions, the one obj's TypeMeta names if any.
func (a *App) kindOf(obj metav1.Object, what string) (schema.GroupVersionKind, error) {
	robj, ok := obj.(runtime.Object)
	if !ok || obj == nil {
		return schema.GroupVersionKind{}, fmt.Errorf("kloop: %s: %T is not a runtime.Object: pass a pointer to an API type, such as *corev1.ConfigMap", what, obj)
	}
	kinds, _, err := a.opts.Scheme.ObjectKinds(robj)
	if err != nil || len(kinds) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("kloop: %s: the App's scheme does not register %T: add its API package's AddToScheme to Options.Scheme (%v)", what, obj, err)
	}
	if tm := robj.GetObjectKind().GroupVersionKind(); !tm.Empty() {
		for _, k := range kinds {
			if k == tm {
				return k, nil
			}
		}
	}
	return kinds[0], nil
}

// sameOwner reports whether two references name the same owner: the same
// group, kind and name (a version change or a new UID is still that
// owner).
func sameOwner(a, b metav1.OwnerReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	return errA == nil && errB == nil && ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}

// upsertRef returns refs with ref in place of the reference to the same
// owner, or added. merge, if not nil, makes the reference that replaces an
// old one (to carry some of the old one over).
func upsertRef(refs []metav1.OwnerReference, ref metav1.OwnerReference, merge func(old metav1.OwnerReference) metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	found := false
	for _, r := range refs {
		if !found && sameOwner(r, ref) {
			found = true
			if merge != nil {
				out = append(out, merge(r))
			} else {
				out = append(out, ref)
			}
			continue
		}
		out = append(out, r)
	}
	if !found {
		out = append(out, ref)
	}
	return out
}

func objectName(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
