package kloopfake

import (
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// patch applies data, a patch of type pt, to cur (a copy of the stored
// object) and returns the patched object, for updateLocked to store.
func (s *Server) patch(r *resource, cur runtime.Object, name string, pt types.PatchType, data []byte) (runtime.Object, error) {
	orig, err := json.Marshal(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("JSON patch of %s %s: %v", r.gvk.Kind, name, err))
		}
		if patched, err = p.Apply(orig); err != nil {
			return nil, invalidPatch(r, name, err)
		}
	case types.MergePatchType:
		if patched, err = jsonpatch.MergePatch(orig, data); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("JSON merge patch of %s %s: %v", r.gvk.Kind, name, err))
		}
	case types.StrategicMergePatchType:
		if !r.builtin {
			return nil, unsupportedMediaType(fmt.Sprintf("strategic merge patch is not supported for %s, a custom resource: use a JSON merge patch (types.MergePatchType) or a JSON patch", r.gvk.Kind))
		}
		schemaObj, _ := s.scheme.New(r.gvk)
		if patched, err = strategicpatch.StrategicMergePatch(orig, data, schemaObj); err != nil {
			return nil, invalidPatch(r, name, err)
		}
	default:
		return nil, unsupportedMediaType(fmt.Sprintf("patch type %q is not one of %s, %s, %s", pt, types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType))
	}
	out, err := s.scheme.New(r.gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, invalidPatch(r, name, err)
	}
	return out, nil
}

func invalidPatch(r *resource, name string, err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid after the patch: %v", r.gvk.Kind, name, err),
		Details: &metav1.StatusDetails{Group: r.gvk.Group, Kind: r.gvk.Kind, Name: name},
	}}
}

func unsupportedMediaType(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType, Message: msg,
	}}
}
