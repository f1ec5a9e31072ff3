package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/internal/convhub"
)

// Hub marks the one version of a kind that every other version converts
// to and from (controller-runtime's contract): usually the storage
// version. Its Hub method does nothing.
type Hub interface {
	runtime.Object
	Hub()
}

// Convertible is every version of a kind but the Hub: it converts itself
// to the Hub and fills itself from one.
type Convertible interface {
	runtime.Object
	ConvertTo(dst Hub) error
	ConvertFrom(src Hub) error
}

// Conversion serves CRD conversion (apiextensions.k8s.io/v1
// ConversionReview) for every kind of scheme that has a Hub version: each
// object goes from its version to the Hub (ConvertTo) and from the Hub to
// the version asked for (ConvertFrom on that version); to or from the Hub
// itself it takes one step, and to its own version none. A kind without a
// Hub, a version missing from the scheme or a conversion that fails or
// panics fails the whole review with a message saying which; a body that
// is not a ConversionReview is answered with HTTP 400.
func Conversion(scheme *runtime.Scheme, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return &converter{scheme: scheme, log: log}
}

type converter struct {
	scheme *runtime.Scheme
	log    *slog.Logger
}

func (c *converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cr, err := readConversionReview(w, r)
	if err != nil {
		c.log.Error("Bad conversion review", "path", r.URL.Path, "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := cr.Request
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	objs, err := c.convertAll(r.Context(), req)
	if err != nil {
		c.log.Error("Conversion failed", "to", req.DesiredAPIVersion, "err", err)
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = objs
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: cr.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		c.log.Error("Writing the conversion response", "err", err)
	}
}

func readConversionReview(w http.ResponseWriter, r *http.Request) (*apiextensionsv1.ConversionReview, error) {
	body, err := readJSON(w, r)
	if err != nil {
		return nil, err
	}
	var cr apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, fmt.Errorf("the body is not a ConversionReview: %w", err)
	}
	if gvk := cr.GroupVersionKind(); gvk != apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview") {
		return nil, fmt.Errorf("the body is a %q %q, want an apiextensions.k8s.io/v1 ConversionReview (set conversionReviewVersions: [v1])", gvk.GroupVersion(), gvk.Kind)
	}
	if cr.Request == nil {
		return nil, errors.New("the ConversionReview has no request")
	}
	return &cr, nil
}

func (c *converter) convertAll(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
	to, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("desiredAPIVersion %q: %w", req.DesiredAPIVersion, err)
	}
	out := make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		b, err := c.convertOne(raw.Raw, to)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		out = append(out, runtime.RawExtension{Raw: b})
	}
	return out, nil
}

// convertOne converts one object to version to, recovering a panic in the
// user's conversion code.
func (c *converter) convertOne(raw []byte, to schema.GroupVersion) (out []byte, err error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	from := tm.GroupVersionKind()
	if from.Kind == "" || from.Version == "" {
		return nil, fmt.Errorf("no apiVersion or kind in %.100s", raw)
	}
	if from.Group != to.Group {
		return nil, fmt.Errorf("cannot convert %s to another group, %s", from, to)
	}
	if from.GroupVersion() == to {
		return raw, nil
	}
	dstGVK := to.WithKind(from.Kind)
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("Panic in a conversion", "from", from, "to", dstGVK, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic converting %s to %s: %v", from, dstGVK, p)
		}
	}()
	src, err := c.scheme.New(from)
	if err != nil {
		return nil, fmt.Errorf("%s is not in the scheme: %w", from, err)
	}
	if err := json.Unmarshal(raw, src); err != nil {
		return nil, fmt.Errorf("decode %s: %w", from, err)
	}
	dst, err := c.scheme.New(dstGVK)
	if err != nil {
		return nil, fmt.Errorf("%s is not in the scheme: %w", dstGVK, err)
	}
	if err := convert(c.scheme, src, dst, from, dstGVK); err != nil {
		return nil, err
	}
	dst.GetObjectKind().SetGroupVersionKind(dstGVK)
	return json.Marshal(dst)
}

// convert goes from src to dst through the Hub of their kind.
func convert(scheme *runtime.Scheme, src, dst runtime.Object, from, to schema.GroupVersionKind) error {
	obj, err := convhub.Of(scheme, from.GroupKind())
	if err != nil {
		return err
	}
	hub := obj.(Hub)
	if h, ok := src.(Hub); ok {
		d, ok := dst.(Convertible)
		if !ok {
			return fmt.Errorf("%s (%T) is neither the Hub nor Convertible: give it ConvertTo and ConvertFrom", to, dst)
		}
		if err := d.ConvertFrom(h); err != nil {
			return fmt.Errorf("convert %s to %s: %w", from, to, err)
		}
		return nil
	}
	s, ok := src.(Convertible)
	if !ok {
		return fmt.Errorf("%s (%T) is neither the Hub nor Convertible: give it ConvertTo and ConvertFrom", from, src)
	}
	if h, ok := dst.(Hub); ok {
		if err := s.ConvertTo(h); err != nil {
			return fmt.Errorf("convert %s to %s: %w", from, to, err)
		}
		return nil
	}
	d, ok := dst.(Convertible)
	if !ok {
		return fmt.Errorf("%s (%T) is neither the Hub nor Convertible: give it ConvertTo and ConvertFrom", to, dst)
	}
	if err := s.ConvertTo(hub); err != nil {
		return fmt.Errorf("convert %s to the hub %s: %w", from, hub.GetObjectKind().GroupVersionKind(), err)
	}
	if err := d.ConvertFrom(hub); err != nil {
		return fmt.Errorf("convert the hub to %s: %w", to, err)
	}
	return nil
}
