package kloop

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/ownwrite"
	"github.com/kloop-dev/kloop/record"
)

// ReasonFinalizerFailed is the reason of the Warning event Finalize
// records when a cleanup fails.
const ReasonFinalizerFailed = "FinalizerFailed"

// Finalize runs one step of an object's life under the finalizer name (a
// qualified name such as "example.com/cleanup"), so that cleanup runs,
// and has succeeded, before the API server removes the object. Call it in
// Reconcile with the object just read, and return what it returns:
//
//	return foos.Finalize(ctx, foo, "example.com/cleanup", r.apply, r.cleanup)
//
// What it does depends on the object:
//
//   - not being deleted, without the finalizer: adds it and returns, without
//     calling apply. The change wakes the controller again (unless its For
//     filters out changes of metadata alone, as GenerationChanged does), and
//     the next call applies: so the finalizer is on the object before apply
//     first makes anything that an owner reference cannot clean up (objects
//     in other namespaces, cluster-scoped ones, anything outside the
//     cluster).
//   - not being deleted, with the finalizer: apply.
//   - being deleted (deletionTimestamp set), with the finalizer: cleanup;
//     when it succeeds the finalizer is removed and the API server goes on
//     deleting. A failed cleanup keeps the finalizer, records a Warning
//     event (ReasonFinalizerFailed) on the object through the App's
//     recorder, and returns its error, so that the controller retries with
//     back-off (a TerminalError stays terminal). cleanup may run more than
//     once: make it idempotent.
//   - being deleted, without the finalizer: nothing (another controller's
//     finalizer holds the object).
//
// Both patches are JSON patches that carry the object's resourceVersion,
// so the API server applies them only to the object that was looked at
// (the finalizer's index included); one that lost a race is a Conflict
// (apierrors.IsConflict) and the controller tries again on the newer
// object.
// It works for cluster-scoped kinds as for namespaced ones. obj is not
// modified.
func (h *Handle[T]) Finalize(ctx context.Context, obj T, name string, apply, cleanup func(ctx context.Context, obj T) (controller.Result, error)) (controller.Result, error) {
	if h.err != nil {
		return controller.Result{}, h.err
	}
	// The API server rejects (built-in kinds) or warns about (custom ones)
	// a finalizer without a domain.
	if errs := apivalidation.ValidateFinalizerName(name, field.NewPath("finalizer")); len(errs) > 0 || !strings.Contains(name, "/") {
		return controller.Result{}, fmt.Errorf("kloop: Finalize %s: finalizer name %q is not a domain-qualified name: use one such as example.com/cleanup", h.gvk.Kind, name)
	}
	if apply == nil || cleanup == nil {
		return controller.Result{}, fmt.Errorf("kloop: Finalize %s with finalizer %s: apply and cleanup must not be nil", h.gvk.Kind, name)
	}
	if obj.GetResourceVersion() == "" {
		return controller.Result{}, fmt.Errorf("kloop: Finalize %s %s: the object has no resourceVersion; pass it as read from the cache or the API server", h.gvk.Kind, objectName(obj))
	}
	log := h.app.logFor(ctx, obj).With("kind", h.gvk.Kind, "finalizer", name)
	finalizers := obj.GetFinalizers()
	at := slices.Index(finalizers, name)
	deleting := obj.GetDeletionTimestamp() != nil
	switch {
	case !deleting && at < 0:
		var ops []jsonPatchOp
		if len(finalizers) == 0 {
			ops = []jsonPatchOp{{Op: "add", Path: "/metadata/finalizers", Value: []string{name}}}
		} else {
			ops = []jsonPatchOp{{Op: "add", Path: "/metadata/finalizers/-", Value: name}}
		}
		// apply runs on the next pass, which the event of this write
		// wakes: it must not count as a write the pass has seen through
		// (see controller.Options.ReconcileOwnWrites).
		if err := h.patchGuarded(ownwrite.Unreported(ctx), obj, ops); err != nil {
			return controller.Result{}, fmt.Errorf("kloop: add finalizer %s to %s %s: %w", name, h.gvk.Kind, objectName(obj), err)
		}
		log.Info("Added finalizer")
		return controller.Result{}, nil
	case !deleting:
		return apply(ctx, obj)
	case at < 0:
		return controller.Result{}, nil
	}
	res, err := cleanup(ctx, obj)
	if err != nil {
		h.app.recorder.Event(obj, record.Warning, ReasonFinalizerFailed, fmt.Sprintf("Finalizer %s: cleanup failed: %v", name, err))
		return res, recorded{fmt.Errorf("kloop: finalizer %s of %s %s: cleanup: %w", name, h.gvk.Kind, objectName(obj), err)}
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", at)
	ops := []jsonPatchOp{{Op: "remove", Path: path}}
	if err := h.patchGuarded(ctx, obj, ops); err != nil {
		return controller.Result{}, fmt.Errorf("kloop: remove finalizer %s from %s %s after its cleanup: %w", name, h.gvk.Kind, objectName(obj), err)
	}
	log.Info("Removed finalizer after its cleanup")
	return res, nil
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patchGuarded applies ops to obj only if the object is still at obj's
// resourceVersion. The patch sets the resourceVersion it read: the API
// server treats that as the update's precondition and answers a Conflict
// when the object has moved on (a "test" op would fail as Invalid, which
// controllers do not take for the race it is).
func (h *Handle[T]) patchGuarded(ctx context.Context, obj T, ops []jsonPatchOp) error {
	guard := jsonPatchOp{Op: "replace", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()}
	data, err := json.Marshal(append([]jsonPatchOp{guard}, ops...))
	if err != nil {
		return err
	}
	_, err = h.Patch(ctx, obj.GetNamespace(), obj.GetName(), types.JSONPatchType, data, client.PatchOptions{})
	return err
}

// logFor is the logger for obj of what runs under ctx: a reconcile's
// (controller.LoggerFrom), which names the reconciled object already, else
// the App's with obj's namespace and name.
func (a *App) logFor(ctx context.Context, obj metav1.Object) *slog.Logger {
	if log := controller.LoggerFrom(ctx); log != slog.Default() {
		return log
	}
	return a.log.With("namespace", obj.GetNamespace(), "name", obj.GetName())
}
