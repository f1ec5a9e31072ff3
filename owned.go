package kloop

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeleteControlledBy deletes the objects in owner's namespace whose
// controller reference is owner, except those named in keep, and returns
// how many it deleted: what a controller does with the objects it made
// under names it no longer wants (after a rename, or when fewer are
// asked for). It reads them from the cache (waiting for this App's own
// writes, like List) and logs each delete. One already gone is not
// counted; any other failure stops it and is returned.
func (h *Handle[T]) DeleteControlledBy(ctx context.Context, owner metav1.Object, keep ...string) (int, error) {
	objs, err := h.List(ctx, owner.GetNamespace(), nil)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, obj := range objs {
		if !metav1.IsControlledBy(obj, owner) || slices.Contains(keep, obj.GetName()) {
			continue
		}
		h.app.log.Info("Deleting an object its controller no longer wants", "kind", h.gvk.Kind,
			"namespace", obj.GetNamespace(), "name", obj.GetName(), "controller", owner.GetName())
		err := h.Delete(ctx, obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}
