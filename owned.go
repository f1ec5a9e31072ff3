package kloop

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/internal/drift"
)

// ListControlledBy returns the cached objects whose controller reference
// is owner (in owner's namespace; in every namespace for a cluster-scoped
// owner), after waiting for the cache's sync (as List) and for this App's
// own writes of objects owner controls or controlled, not for every write
// in the namespace as List does (see client.CachedReader.ListControlledBy).
// The objects are read-only.
func (h *Handle[T]) ListControlledBy(ctx context.Context, owner metav1.Object) ([]T, error) {
	if err := h.readable(ctx); err != nil {
		return nil, err
	}
	if owner == nil || owner.GetUID() == "" {
		return nil, fmt.Errorf("kloop: ListControlledBy on %s: the owner has no UID; pass the owner as read from the API server or a cache", h.gvk.Kind)
	}
	return h.reader.ListControlledBy(ctx, owner.GetNamespace(), owner.GetUID())
}

// DeleteControlledBy deletes the objects whose controller reference is
// owner (see ListControlledBy), except those named in keep, and returns how
// many it deleted: what a controller does with the objects it made under
// names it no longer wants (after a rename, or when fewer are asked for).
// It logs each delete. One already gone is not counted; any other failure
// stops it and is returned.
//
// The deletes propagate in the background: the garbage collector deletes
// what the deleted objects own in turn (a Job's Pods, which a Job's
// default, orphan, would leave behind). For another propagation, list with
// ListControlledBy and Delete with its DeleteOptions.
func (h *Handle[T]) DeleteControlledBy(ctx context.Context, owner metav1.Object, keep ...string) (int, error) {
	propagation := metav1.DeletePropagationBackground
	objs, err := h.ListControlledBy(ctx, owner)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, obj := range objs {
		if slices.Contains(keep, obj.GetName()) {
			continue
		}
		h.app.log.Info("Deleting an object its controller no longer wants", "kind", h.gvk.Kind,
			"namespace", obj.GetNamespace(), "name", obj.GetName(), "controller", owner.GetName(), "propagation", propagation)
		err := h.Delete(ctx, obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &propagation})
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

// Repair applies want, an apply configuration of the fields this App owns
// of the object live, when drift.Drifted(live, want), and reports
// whether it applied; an object in place costs no request. Only what want
// sets is compared and sent. The apply is forced (the App takes those
// fields back from other field managers) and guarded by live's
// resourceVersion, so it changes only the object that was checked (a
// Conflict otherwise: retry). It logs each repair.
//
// With live nil (a Get that found nothing) it creates want by an apply,
// not forced, so that the App's manager owns its fields by Apply from the
// start (a Create would own them by Update: see MoveToApply).
func (h *Handle[T]) Repair(ctx context.Context, live T, want runtime.ApplyConfiguration) (T, bool, error) {
	if v := reflect.ValueOf(live); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
		got, err := h.Apply(ctx, want, client.PatchOptions{})
		if err != nil {
			return live, false, err
		}
		h.app.log.Info("Created "+h.gvk.Kind, "namespace", got.GetNamespace(), "name", got.GetName())
		return got, true, nil
	}
	if !drift.Drifted(live, want) {
		return live, false, nil
	}
	h.app.log.Info("Repairing "+h.gvk.Kind, "namespace", live.GetNamespace(), "name", live.GetName())
	got, err := h.Apply(ctx, want, client.PatchOptions{Force: true, ResourceVersion: live.GetResourceVersion()})
	if err != nil {
		return live, false, err
	}
	return got, true, nil
}
