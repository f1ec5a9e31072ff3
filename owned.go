package kloop

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/client"
)

// DeleteControlledBy deletes the objects in owner's namespace whose
// controller reference is owner, except those named in keep, and returns
// how many it deleted: what a controller does with the objects it made
// under names it no longer wants (after a rename, or when fewer are
// asked for). It reads them from the cache, after waiting for this App's
// own writes of objects owner controls or controlled (not for every write
// in the namespace, as List does: see client.CachedReader.ListControlledBy),
// and logs each delete. One already gone is not counted; any other failure
// stops it and is returned.
func (h *Handle[T]) DeleteControlledBy(ctx context.Context, owner metav1.Object, keep ...string) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	objs, err := h.reader.ListControlledBy(ctx, owner.GetNamespace(), owner.GetUID())
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, obj := range objs {
		if slices.Contains(keep, obj.GetName()) {
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

// GetOrCreate returns the object named like want (its namespace and name)
// from the cache, waiting for this App's own writes as Get does, and
// creates want when there is none. It reports whether it created, and logs
// a create. An error is the read's or the create's (AlreadyExists when
// someone else created it meanwhile: retry).
func (h *Handle[T]) GetOrCreate(ctx context.Context, want T) (T, bool, error) {
	obj, err := h.Get(ctx, want.GetNamespace(), want.GetName())
	if !apierrors.IsNotFound(err) {
		return obj, false, err
	}
	if obj, err = h.Create(ctx, want); err != nil {
		return obj, false, err
	}
	h.app.log.Info("Created "+h.gvk.Kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
	return obj, true, nil
}

// Repair applies want, the fields this App owns of the object live, with
// server-side apply when Drifted(live, want), and reports whether it
// applied; an object in place costs no request. The apply is forced (the
// App takes those fields back from other field managers) and guarded by
// live's resourceVersion, so it changes only the object that was checked
// (a Conflict otherwise: retry). It logs each repair.
func (h *Handle[T]) Repair(ctx context.Context, live, want T) (T, bool, error) {
	if !Drifted(live, want) {
		return live, false, nil
	}
	h.app.log.Info("Repairing "+h.gvk.Kind, "namespace", live.GetNamespace(), "name", live.GetName())
	want.SetResourceVersion(live.GetResourceVersion())
	got, err := h.Apply(ctx, want, client.PatchOptions{Force: true})
	if err != nil {
		return live, false, err
	}
	return got, true, nil
}
