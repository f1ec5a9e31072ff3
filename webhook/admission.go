package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"runtime/debug"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// maxBody bounds a review's body; the API server's own limit on an object
// is 3 MiB, and a review holds two.
const maxBody = 7 << 20

// Warnings are shown to the client that made the request (kubectl prints
// them), whether it is allowed or not.
type Warnings []string

// Validator checks a create, an update or a delete of a T. An error refuses
// the request (see Validating); warnings go to the client either way.
type Validator[T runtime.Object] interface {
	ValidateCreate(ctx context.Context, obj T) (Warnings, error)
	ValidateUpdate(ctx context.Context, oldObj, newObj T) (Warnings, error)
	ValidateDelete(ctx context.Context, obj T) (Warnings, error)
}

type requestKey struct{}

// RequestFrom returns the admission request a defaulting function or a
// Validator is called for: its operation, user, dry-run flag, sub-resource.
func RequestFrom(ctx context.Context) (*admissionv1.AdmissionRequest, bool) {
	r, ok := ctx.Value(requestKey{}).(*admissionv1.AdmissionRequest)
	return r, ok
}

// Mutating serves the mutating webhook of T (admission.k8s.io/v1
// AdmissionReview): it decodes the object through scheme, calls d, which
// sets defaults on it in place (an error refuses the request), and answers
// with the JSON patch from the object as sent to the object as d left it. Fields the Go type does not know are left as they are, not
// removed. DELETE and CONNECT are allowed without calling d.
//
// An error from d refuses the request. One that is an
// apierrors.APIStatus, such as apierrors.NewInvalid(gk, name, errs), is
// answered with its Status, so the client sees `... "x" is invalid:
// spec.field: ...`; any other is a 403 Forbidden with its message. A panic
// in d refuses the request with code 500 and the panic's value. A body that
// is not an AdmissionReview is answered with HTTP 400.
func Mutating[T runtime.Object](scheme *runtime.Scheme, d func(ctx context.Context, obj T) error, log *slog.Logger) http.Handler {
	return newAdmission[T](scheme, log, "defaulter", func(ctx context.Context, dec *decoder[T], req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		orig, err := dec.decode(req.Object.Raw)
		if err != nil {
			return badObject(err)
		}
		obj, _ := dec.decode(req.Object.Raw)
		if err := d(ctx, obj); err != nil {
			return denial(err, nil)
		}
		patch, err := patchFor(req.Object.Raw, orig, obj)
		if err != nil {
			return internal(err)
		}
		resp := &admissionv1.AdmissionResponse{Allowed: true}
		if len(patch) > 0 {
			b, err := json.Marshal(patch)
			if err != nil {
				return internal(err)
			}
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = b, &pt
		}
		return resp
	})
}

// Validating serves the validating webhook of T: ValidateCreate with the
// new object, ValidateUpdate with the old (request.oldObject) and the new,
// ValidateDelete with the object being deleted (request.oldObject).
// CONNECT is allowed. Errors, panics and bad bodies are answered as
// Mutating answers them; warnings reach the client in either case.
func Validating[T runtime.Object](scheme *runtime.Scheme, v Validator[T], log *slog.Logger) http.Handler {
	return newAdmission[T](scheme, log, "validator", func(ctx context.Context, dec *decoder[T], req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var warnings Warnings
		var err error
		switch req.Operation {
		case admissionv1.Create:
			obj, derr := dec.decode(req.Object.Raw)
			if derr != nil {
				return badObject(derr)
			}
			warnings, err = v.ValidateCreate(ctx, obj)
		case admissionv1.Update:
			oldObj, derr := dec.decode(req.OldObject.Raw)
			if derr != nil {
				return badObject(fmt.Errorf("oldObject: %w", derr))
			}
			obj, derr := dec.decode(req.Object.Raw)
			if derr != nil {
				return badObject(derr)
			}
			warnings, err = v.ValidateUpdate(ctx, oldObj, obj)
		case admissionv1.Delete:
			oldObj, derr := dec.decode(req.OldObject.Raw)
			if derr != nil {
				return badObject(fmt.Errorf("oldObject: %w", derr))
			}
			warnings, err = v.ValidateDelete(ctx, oldObj)
		default:
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		if err != nil {
			return denial(err, warnings)
		}
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
	})
}

// decoder makes T values from JSON through a scheme.
type decoder[T runtime.Object] struct {
	codecs serializer.CodecFactory
	elem   reflect.Type // T's element type; nil when T is not a pointer
}

func (d *decoder[T]) decode(raw []byte) (T, error) {
	var zero T
	if len(raw) == 0 {
		return zero, errors.New("no object in the request")
	}
	into, _ := reflect.New(d.elem).Interface().(T)
	obj, gvk, err := d.codecs.UniversalDeserializer().Decode(raw, nil, into)
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("the object is a %v, not a %T", gvk, zero)
	}
	return t, nil
}

type review[T runtime.Object] func(ctx context.Context, dec *decoder[T], req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

type admission[T runtime.Object] struct {
	dec  *decoder[T]
	log  *slog.Logger
	what string // "defaulter", "validator": for panics
	do   review[T]
}

func newAdmission[T runtime.Object](scheme *runtime.Scheme, log *slog.Logger, what string, do review[T]) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	var zero T
	t := reflect.TypeOf(&zero).Elem()
	if t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("webhook: %v is not a pointer type: give the pointer, such as *corev1.ConfigMap", t))
	}
	return &admission[T]{dec: &decoder[T]{codecs: serializer.NewCodecFactory(scheme), elem: t.Elem()}, log: log, what: what, do: do}
}

func (a *admission[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ar, err := readReview(w, r)
	if err != nil {
		a.log.Error("Bad admission review", "path", r.URL.Path, "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := ar.Request
	log := a.log.With("path", r.URL.Path, "operation", req.Operation, "namespace", req.Namespace, "name", req.Name)
	resp := a.call(r.Context(), req, log)
	resp.UID = req.UID
	if !resp.Allowed {
		log.Info("Denied", "code", resp.Result.Code, "reason", resp.Result.Message)
	}
	out := admissionv1.AdmissionReview{TypeMeta: ar.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Error("Writing the admission response", "err", err)
	}
}

// call runs the review, turning a panic in user code into a denial.
func (a *admission[T]) call(ctx context.Context, req *admissionv1.AdmissionRequest, log *slog.Logger) (resp *admissionv1.AdmissionResponse) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("Panic in the "+a.what, "panic", p, "stack", string(debug.Stack()))
			resp = &admissionv1.AdmissionResponse{Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
				Message: fmt.Sprintf("panic in the %s of %T: %v", a.what, *new(T), p),
			}}
		}
	}()
	return a.do(context.WithValue(ctx, requestKey{}, req), a.dec, req)
}

// readReview decodes an admission.k8s.io/v1 AdmissionReview request, or
// says what is wrong with the body.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, error) {
	body, err := readJSON(w, r)
	if err != nil {
		return nil, err
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("the body is not an AdmissionReview: %w", err)
	}
	if gvk := ar.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, fmt.Errorf("the body is a %q %q, want an admission.k8s.io/v1 AdmissionReview (set admissionReviewVersions: [v1])", gvk.GroupVersion(), gvk.Kind)
	}
	if ar.Request == nil {
		return nil, errors.New("the AdmissionReview has no request")
	}
	return &ar, nil
}

// readJSON reads a POSTed JSON body.
func readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Method != http.MethodPost {
		return nil, fmt.Errorf("method %s: want POST", r.Method)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, fmt.Errorf("content type %q: want application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) == 0 {
		return nil, errors.New("the body is empty")
	}
	return body, nil
}

// denial answers a refusing error as the API server should show it.
func denial(err error, warnings Warnings) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{Warnings: warnings}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		resp.Result = &s
		return resp
	}
	resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
	return resp
}

func badObject(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
		Message: "webhook cannot decode the object: " + err.Error(),
	}}
}

func internal(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Message: err.Error(),
	}}
}

// patchFor is the JSON patch from raw, the object as sent, to obj, as the
// defaulter left it. orig is raw decoded: what the Go type drops of raw
// (unknown fields, explicit zero values) shows as removals from raw to
// orig, and those are no defaulter's doing, so they are left out.
func patchFor(raw []byte, orig, obj runtime.Object) ([]jsonpatch.Operation, error) {
	origJSON, err := json.Marshal(orig)
	if err != nil {
		return nil, err
	}
	objJSON, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dropped, err := jsonpatch.CreatePatch(raw, origJSON)
	if err != nil {
		return nil, err
	}
	removed := map[string]bool{}
	for _, op := range dropped {
		if op.Operation == "remove" {
			removed[op.Path] = true
		}
	}
	patch, err := jsonpatch.CreatePatch(raw, objJSON)
	if err != nil {
		return nil, err
	}
	kept := patch[:0]
	for _, op := range patch {
		if op.Operation == "remove" && removed[op.Path] {
			continue
		}
		kept = append(kept, op)
	}
	return kept, nil
}
