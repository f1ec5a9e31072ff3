package kloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/informer"
)

// errStatusIgnored is the error of an update of a whole object that did not
// change its status: the resource has gained a status subresource.
var errStatusIgnored = errors.New("the API server kept the old status: the resource has a status subresource now; retrying through it")

// WriteStatus writes obj's status unless there is nothing to write, and
// reports whether it wrote. obj is a copy of a cached object with its
// status changed; the rest of it is not written (use Update for that).
//
// There is nothing to write when obj's status is the one cached for the
// object, or when it is the status this handle last wrote for the object
// and the object has not changed since. The second case is a CRD whose
// schema prunes status fields (sample-controller's, for fields added
// later): the server keeps less than was written, and writing the same
// again would change nothing but the resourceVersion, which would wake the
// controller to write it again, for ever. Skipped, WriteStatus returns the
// cached object.
//
// It writes through the status subresource when discovery says the
// resource has one, by a server-side apply of the whole status (forced:
// the App owns the status by Apply, so a field it stops setting goes; by
// an update instead when the CRD's schema lacks fields the status sets,
// which an apply is refused for), otherwise by an update of the whole object (a CRD
// without the subresource, such as sample-controller's plain crd.yaml).
// Discovery is asked once, and again when its answer proves wrong under a
// running program (a 404 from /status, or an update that kept the old
// status, which is then retried through the subresource).
func (h *Handle[T]) WriteStatus(ctx context.Context, obj T) (T, bool, error) {
	if h.err != nil {
		return obj, false, h.err
	}
	key := cache.KeyOf(obj)
	want := statusOf(obj)
	if cur, ok := h.inf.Lister().Get(key.Namespace, key.Name); ok {
		last, wrote := h.writes.last(key)
		if storedEqual.DeepEqual(statusOf(cur), want) ||
			wrote && last.rv == cur.GetResourceVersion() && storedEqual.DeepEqual(last.status, want) {
			return cur, false, nil
		}
	}
	got, err := h.writeStatus(ctx, obj)
	if err != nil {
		return got, false, fmt.Errorf("write status of %s %s: %w", h.gvk.Kind, key, err)
	}
	if storedEqual.DeepEqual(statusOf(got), want) {
		// The server stored the status as written: once the cache holds
		// this write it holds this status, which the first check above
		// finds, so nothing need be kept (an entry of an earlier pruned
		// write goes).
		h.writes.forget(key)
	} else {
		h.writes.remember(key, got.GetResourceVersion(), want, h.forgetDeleted)
	}
	return got, true, nil
}

// storedEqual is equality.Semantic with times compared at the precision the
// API server stores them: metav1.Time to the second, metav1.MicroTime to the
// microsecond. A condition set by meta.SetStatusCondition carries the
// nanoseconds of time.Now, which the server drops; a status that differs
// only there is stored as written.
var storedEqual = conversion.EqualitiesOrDie(
	func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 },
	func(a, b metav1.MicroTime) bool {
		return a.UTC().Truncate(time.Microsecond) == b.UTC().Truncate(time.Microsecond)
	},
	func(a, b metav1.Time) bool { return a.UTC().Truncate(time.Second) == b.UTC().Truncate(time.Second) },
	func(a, b metav1.FieldsV1) bool { return a.Equal(b) },
	func(a, b labels.Selector) bool { return a.String() == b.String() },
	func(a, b fields.Selector) bool { return a.String() == b.String() },
)

func (h *Handle[T]) writeStatus(ctx context.Context, obj T) (T, error) {
	sub, err := h.hasStatus(ctx)
	if err != nil {
		return obj, err
	}
	if sub && !h.statusByUpdate.Load() {
		got, err := h.res.Apply(ctx, statusConfig{h.gvk, obj.GetNamespace(), obj.GetName(), statusOf(obj)},
			client.PatchOptions{Subresource: "status", Force: true})
		if err != nil && strings.Contains(err.Error(), "field not declared in schema") {
			// The CRD's schema lacks fields the status sets (it prunes
			// them): an apply is refused where an update is pruned.
			h.statusByUpdate.Store(true)
		} else {
			if apierrors.IsNotFound(err) {
				h.forgetStatus()
			}
			return got, err
		}
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
		return got, errStatusIgnored
	}
	return got, err
}

// statusWrites remembers, per object whose last status write the server
// kept less of (pruned fields), the resourceVersion that write returned and
// the status it wrote. An object's entry goes when a later write of its
// status is stored as written, or when the informer reports it deleted.
type statusWrites struct {
	mu      sync.Mutex
	byKey   map[cache.Key]statusWrite
	watched bool
}

type statusWrite struct {
	rv     string
	status any // as written; never nil
}

func (w *statusWrites) last(k cache.Key) (statusWrite, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sw, ok := w.byKey[k]
	return sw, ok
}

// remember records a write; the first one subscribes to the deletes of the
// handle's objects.
func (w *statusWrites) remember(k cache.Key, rv string, status any, subscribe func(forget func(cache.Key)) error) {
	w.mu.Lock()
	if w.byKey == nil {
		w.byKey = map[cache.Key]statusWrite{}
	}
	w.byKey[k] = statusWrite{rv: rv, status: status}
	first := !w.watched
	w.watched = true
	w.mu.Unlock()
	if first && subscribe(w.forget) != nil {
		// The informer has stopped: no more writes will come either.
		return
	}
}

func (w *statusWrites) forget(k cache.Key) {
	w.mu.Lock()
	delete(w.byKey, k)
	if len(w.byKey) == 0 {
		w.byKey = nil // a Go map keeps its room when emptied
	}
	w.mu.Unlock()
}

// statusOf returns the Status field of a typed object, or nil.
func statusOf(obj any) any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if u == nil {
			return nil
		}
		return u.Object["status"]
	}
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

// forgetDeleted drops the status writes of objects the informer reports
// deleted. forget only takes a short lock, so it runs inline, on the
// informer's goroutine.
func (h *Handle[T]) forgetDeleted(forget func(cache.Key)) error {
	_, err := h.inf.AddHandler(informer.HandlerFuncs[T]{
		DeleteFunc: func(obj T, _ bool) { forget(cache.KeyOf(obj)) },
	}, informer.HandlerOptions{Name: "kloop-status-writes", Inline: true})
	return err
}

// statusConfig is the apply configuration of an object's whole status, for
// WriteStatus: the App owns its status by Apply (and forces, as no one else
// should write it), so a field the status no longer sets is removed.
type statusConfig struct {
	gvk             schema.GroupVersionKind
	namespace, name string
	status          any
}

func (statusConfig) IsApplyConfiguration() {}

func (c statusConfig) MarshalJSON() ([]byte, error) {
	md := map[string]string{"name": c.name}
	if c.namespace != "" {
		md["namespace"] = c.namespace
	}
	return json.Marshal(map[string]any{"apiVersion": c.gvk.GroupVersion().String(), "kind": c.gvk.Kind, "metadata": md, "status": c.status})
}
