package kloop

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"

	"github.com/kloop-dev/kloop/client"
)

// MoveToApply hands the fields of the named object that the field
// managers managers own through updates (create, update, patch; of the
// object and of its status subresource) to the App's own manager for
// server-side apply, and reports whether there was anything to move. With
// no managers it moves the App's own name's: a program that wrote an object
// (or its status, by UpdateStatus) with Create or Update and now applies
// it.
//
// Call it once, before the first Apply that replaces those writes.
// Without it the fields stay owned by the old update manager, so an
// apply configuration that stops setting one leaves it on the object for
// ever; after it, they are the apply manager's, and dropping a field from
// the configuration removes it from the object. It reads the object from
// the API server (the cache may not keep managedFields) and patches only
// its managedFields, guarded by the resourceVersion it read (a Conflict if
// the object changed in between: call it again).
func (h *Handle[T]) MoveToApply(ctx context.Context, namespace, name string, managers ...string) (bool, error) {
	if h.err != nil {
		return false, h.err
	}
	if len(managers) == 0 {
		managers = []string{h.app.opts.Name}
	}
	live, err := h.res.Get(ctx, namespace, name)
	if err != nil {
		return false, err
	}
	before := live.GetManagedFields()
	from := sets.New(managers...)
	for _, sub := range []string{"", "status"} {
		if err := csaupgrade.UpgradeManagedFields(live, from, h.app.opts.Name, csaupgrade.Subresource(sub)); err != nil {
			return false, fmt.Errorf("move the fields of %s %s/%s to apply: %w", h.gvk.Kind, namespace, name, err)
		}
	}
	if reflect.DeepEqual(before, live.GetManagedFields()) {
		return false, nil
	}
	// The resourceVersion is replaced rather than tested, so that a change
	// in between is the storage's Conflict, not an invalid patch.
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": live.GetManagedFields()},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
	})
	if err != nil {
		return false, err
	}
	if _, err := h.res.Patch(ctx, namespace, name, types.JSONPatchType, patch, client.PatchOptions{}); err != nil {
		return false, fmt.Errorf("move the fields of %s %s/%s to apply: %w", h.gvk.Kind, namespace, name, err)
	}
	return true, nil
}
