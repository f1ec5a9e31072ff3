package kloop

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// errStatusIgnored is the error of an update of a whole object that did not
// change its status: the resource has gained a status subresource.
var errStatusIgnored = errors.New("the API server kept the old status: the resource has a status subresource now; retrying through it")

// WriteStatus writes obj's status, whether or not the resource has a status
// subresource: through it when discovery says it is served, otherwise by an
// update of the whole object (a CRD without the subresource, such as
// sample-controller's plain crd.yaml). Discovery is asked once, and again
// when its answer proves wrong under a running program (a 404 from
// /status, or an update that kept the old status, which is then retried
// through the subresource).
func (h *Handle[T]) WriteStatus(ctx context.Context, obj T) (T, error) {
	if h.err != nil {
		return obj, h.err
	}
	sub, err := h.hasStatus(ctx)
	if err != nil {
		return obj, err
	}
	if sub {
		got, err := h.res.UpdateStatus(ctx, obj)
		if apierrors.IsNotFound(err) {
			h.forgetStatus()
		}
		return got, err
	}
	got, err := h.res.Update(ctx, obj)
	if err == nil && !reflect.DeepEqual(statusOf(got), statusOf(obj)) {
		h.forgetStatus()
		return got, fmt.Errorf("write status of %s %s/%s: %w", h.gvk.Kind, obj.GetNamespace(), obj.GetName(), errStatusIgnored)
	}
	return got, err
}

// statusOf returns the Status field of a typed object, or nil.
func statusOf(obj any) any {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	f := v.FieldByName("Status")
	if !f.IsValid() {
		return nil
	}
	return f.Interface()
}

// statusSubresource remembers whether a resource is served with a status
// subresource. One per Handle.
type statusSubresource struct {
	mu    sync.Mutex
	known bool
	has   bool
}

func (h *Handle[T]) hasStatus(ctx context.Context) (bool, error) {
	s := &h.status
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		return s.has, nil
	}
	disc, err := discovery.NewDiscoveryClientForConfig(h.app.cfg)
	if err != nil {
		return false, err
	}
	list, err := disc.ServerResourcesForGroupVersionWithContext(ctx, h.gvr.GroupVersion().String())
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", h.gvr.GroupVersion(), err)
	}
	s.has = false
	for _, r := range list.APIResources {
		if r.Name == h.gvr.Resource+"/status" {
			s.has = true
		}
	}
	s.known = true
	return s.has, nil
}

func (h *Handle[T]) forgetStatus() {
	h.status.mu.Lock()
	h.status.known = false
	h.status.mu.Unlock()
}
