package kloopfake

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// store holds every object of a Server and the history of their changes.
// It is the server's core: the write semantics live here, free of HTTP.
// Stored objects are never modified (a write stores a new copy), so events
// and watchers share them; callers get copies.
type store struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	rv      uint64 // the last resourceVersion handed out
	objs    map[schema.GroupVersionResource]map[objKey]runtime.Object
	events  []event       // every change, in resourceVersion order
	changed chan struct{} // closed and replaced by every change
}

type objKey struct{ namespace, name string }

// event is one change: obj is the object after it (for Deleted, the last
// state at the delete's resourceVersion), old the one before (nil for
// Added).
type event struct {
	rv       uint64
	gvr      schema.GroupVersionResource
	typ      watch.EventType
	obj, old runtime.Object
}

func newStore(c clock.PassiveClock) *store {
	// The empty store is at resourceVersion 1: "0" means "any" to clients.
	return &store{clock: c, rv: 1, objs: map[schema.GroupVersionResource]map[objKey]runtime.Object{}, changed: make(chan struct{})}
}

// commitLocked stores obj (nil: removes the key) as the change typ at the
// next resourceVersion, which it sets on obj, and wakes the watchers.
func (s *store) commitLocked(r *resource, k objKey, typ watch.EventType, obj, old runtime.Object) {
	s.rv++
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	mustAccessor(obj).SetResourceVersion(strconv.FormatUint(s.rv, 10))
	byKey := s.objs[r.gvr]
	if byKey == nil {
		byKey = map[objKey]runtime.Object{}
		s.objs[r.gvr] = byKey
	}
	if typ == watch.Deleted {
		delete(byKey, k)
	} else {
		byKey[k] = obj
	}
	s.events = append(s.events, event{rv: s.rv, gvr: r.gvr, typ: typ, obj: obj, old: old})
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *store) get(r *resource, ns, name string) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objs[r.gvr][objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name)
	}
	return obj.DeepCopyObject(), nil
}

// selector is a list's or watch's label and field selectors.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

// newSelector parses the selectors; a field selector may name only
// metadata.name and metadata.namespace.
func newSelector(labelSel, fieldSel string) (selector, error) {
	sel := selector{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if labelSel != "" {
		if sel.labels, err = labels.Parse(labelSel); err != nil {
			return sel, apierrors.NewBadRequest(fmt.Sprintf("labelSelector %q: %v", labelSel, err))
		}
	}
	if fieldSel != "" {
		if sel.fields, err = fields.ParseSelector(fieldSel); err != nil {
			return sel, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector %q: %v", fieldSel, err))
		}
		for _, req := range sel.fields.Requirements() {
			if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
				return sel, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector %q: field label not supported: %s (the in-memory API server selects by metadata.name and metadata.namespace only)", fieldSel, req.Field))
			}
		}
	}
	return sel, nil
}

func (sel selector) matches(ns string, obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	a := mustAccessor(obj)
	if ns != "" && a.GetNamespace() != ns {
		return false
	}
	return sel.labels.Matches(labels.Set(a.GetLabels())) &&
		sel.fields.Matches(fields.Set{"metadata.name": a.GetName(), "metadata.namespace": a.GetNamespace()})
}

// list returns copies of the objects of r in ns ("" for all) that sel
// matches, sorted by namespace and name, and the current resourceVersion.
func (s *store) list(r *resource, ns string, sel selector) ([]runtime.Object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Object
	for _, obj := range s.objs[r.gvr] {
		if sel.matches(ns, obj) {
			out = append(out, obj.DeepCopyObject())
		}
	}
	slices.SortFunc(out, func(a, b runtime.Object) int {
		x, y := mustAccessor(a), mustAccessor(b)
		if x.GetNamespace() != y.GetNamespace() {
			if x.GetNamespace() < y.GetNamespace() {
				return -1
			}
			return 1
		}
		if x.GetName() < y.GetName() {
			return -1
		}
		if x.GetName() > y.GetName() {
			return 1
		}
		return 0
	})
	return out, s.rv
}

// since returns the events of gvr after resourceVersion rv, the current
// resourceVersion, and a channel closed at the next change.
func (s *store) since(gvr schema.GroupVersionResource, rv uint64) (evs []event, now uint64, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.events), func(i int) bool { return s.events[i].rv > rv })
	for _, ev := range s.events[i:] {
		if ev.gvr == gvr {
			evs = append(evs, ev)
		}
	}
	return evs, s.rv, s.changed
}

// snapshot returns the objects of gvr as they are (shared, not copied: for
// encoding only) and the current resourceVersion.
func (s *store) snapshot(gvr schema.GroupVersionResource) ([]runtime.Object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]runtime.Object, 0, len(s.objs[gvr]))
	for _, obj := range s.objs[gvr] {
		out = append(out, obj)
	}
	return out, s.rv
}

// now is the time for timestamps, at the second, as the API server
// stores them.
func (s *store) now() metav1.Time { return metav1.NewTime(s.clock.Now()).Rfc3339Copy() }

// checkNamespace puts the request's namespace ns on a, or reports the
// mismatch.
func checkNamespace(r *resource, ns string, a metav1.Object) error {
	if !r.namespaced {
		a.SetNamespace("")
		return nil
	}
	if a.GetNamespace() == "" {
		a.SetNamespace(ns)
	}
	switch {
	case a.GetNamespace() == "":
		return apierrors.NewBadRequest(fmt.Sprintf("%s %q is namespaced: give it a namespace", r.gvk.Kind, a.GetName()))
	case ns != "" && a.GetNamespace() != ns:
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", a.GetNamespace(), ns))
	}
	return nil
}

// create stores obj (the caller's, now the store's) as a new object of r
// in ns. seed keeps what a create through the API resets (status, uid,
// creationTimestamp): Server.Add.
func (s *store) create(r *resource, ns string, obj runtime.Object, seed, dryRun bool) (runtime.Object, error) {
	a := mustAccessor(obj)
	if a.GetName() == "" && a.GetGenerateName() != "" {
		a.SetName(a.GetGenerateName() + utilrand.String(5))
	}
	if a.GetName() == "" {
		return nil, apierrors.NewInvalid(r.gvk.GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if err := checkNamespace(r, ns, a); err != nil {
		return nil, err
	}
	if a.GetResourceVersion() != "" && !seed {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objKey{a.GetNamespace(), a.GetName()}
	if _, ok := s.objs[r.gvr][k]; ok {
		return nil, apierrors.NewAlreadyExists(r.gvr.GroupResource(), a.GetName())
	}
	if !seed || a.GetUID() == "" {
		a.SetUID(uuid.NewUUID())
	}
	if ts := a.GetCreationTimestamp(); !seed || ts.IsZero() {
		a.SetCreationTimestamp(s.now())
	}
	if !seed {
		a.SetDeletionTimestamp(nil)
		a.SetDeletionGracePeriodSeconds(nil)
		if r.status {
			setStatus(obj, nil)
		}
	}
	a.SetGeneration(1)
	if dryRun {
		return obj.DeepCopyObject(), nil
	}
	s.commitLocked(r, k, watch.Added, obj, nil)
	return obj.DeepCopyObject(), nil
}

// update replaces the object of r at ns/name with obj (the caller's, now
// the store's): the whole object but its status when sub is "", only its
// status when sub is "status".
func (s *store) update(r *resource, ns, name, sub string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(r, ns, name, sub, func(runtime.Object) (runtime.Object, error) { return obj, nil }, dryRun)
}

// updateLocked reads the object at ns/name, lets change make its new state
// from a copy, and stores that as update describes.
func (s *store) updateLocked(r *resource, ns, name, sub string, change func(cur runtime.Object) (runtime.Object, error), dryRun bool) (runtime.Object, error) {
	if sub != "" && (sub != "status" || !r.status) {
		return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name+"/"+sub)
	}
	k := objKey{ns, name}
	if !r.namespaced {
		k.namespace = ""
	}
	old, ok := s.objs[r.gvr][k]
	if !ok {
		return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name)
	}
	obj, err := change(old.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	a := mustAccessor(obj)
	if a.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", a.GetName(), name))
	}
	if err := checkNamespace(r, k.namespace, a); err != nil {
		return nil, err
	}
	oa := mustAccessor(old)
	if rv := a.GetResourceVersion(); rv != "" && rv != oa.GetResourceVersion() {
		return nil, apierrors.NewConflict(r.gvr.GroupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid := a.GetUID(); uid != "" && uid != oa.GetUID() {
		return nil, apierrors.NewConflict(r.gvr.GroupResource(), name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", uid, oa.GetUID()))
	}

	var next runtime.Object
	if sub == "status" {
		next = old.DeepCopyObject()
		setStatus(next, obj)
	} else {
		next = obj
		if r.status {
			setStatus(next, old)
		}
	}
	na := mustAccessor(next)
	// What the API server keeps from the stored object whatever the update
	// says.
	na.SetUID(oa.GetUID())
	na.SetCreationTimestamp(oa.GetCreationTimestamp())
	na.SetDeletionTimestamp(oa.GetDeletionTimestamp())
	na.SetDeletionGracePeriodSeconds(oa.GetDeletionGracePeriodSeconds())
	na.SetGeneration(oa.GetGeneration())
	na.SetResourceVersion(oa.GetResourceVersion())
	if oa.GetDeletionTimestamp() != nil {
		for _, f := range na.GetFinalizers() {
			if !slices.Contains(oa.GetFinalizers(), f) {
				return nil, apierrors.NewInvalid(r.gvk.GroupKind(), name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"),
					fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizer %q", f))})
			}
		}
	}
	if equality.Semantic.DeepEqual(old, next) {
		return next, nil // nothing changed: nothing is written
	}
	if !equality.Semantic.DeepEqual(specOf(r, old), specOf(r, next)) {
		na.SetGeneration(oa.GetGeneration() + 1)
	}
	if dryRun {
		return next.DeepCopyObject(), nil
	}
	typ := watch.Modified
	if na.GetDeletionTimestamp() != nil && len(na.GetFinalizers()) == 0 {
		typ = watch.Deleted // the last finalizer is off: the object goes
	}
	s.commitLocked(r, k, typ, next, old)
	return next.DeepCopyObject(), nil
}

// deleted is what delete did: gone says the object was removed (else it
// waits on finalizers).
type deleted struct {
	obj  runtime.Object
	gone bool
}

// delete deletes the object of r at ns/name: at once without finalizers,
// else by setting its deletionTimestamp (once).
func (s *store) delete(r *resource, ns, name string, opts *metav1.DeleteOptions) (deleted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objKey{ns, name}
	if !r.namespaced {
		k.namespace = ""
	}
	old, ok := s.objs[r.gvr][k]
	if !ok {
		return deleted{}, apierrors.NewNotFound(r.gvr.GroupResource(), name)
	}
	oa := mustAccessor(old)
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != oa.GetUID() {
			return deleted{}, apierrors.NewConflict(r.gvr.GroupResource(), name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, oa.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != oa.GetResourceVersion() {
			return deleted{}, apierrors.NewConflict(r.gvr.GroupResource(), name, fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, oa.GetResourceVersion()))
		}
	}
	if len(oa.GetFinalizers()) > 0 && oa.GetDeletionTimestamp() != nil {
		return deleted{obj: old.DeepCopyObject()}, nil // being deleted already
	}
	next := old.DeepCopyObject()
	if len(opts.DryRun) > 0 {
		return deleted{obj: next, gone: len(oa.GetFinalizers()) == 0}, nil
	}
	if len(oa.GetFinalizers()) == 0 {
		s.commitLocked(r, k, watch.Deleted, next, old)
		return deleted{obj: next.DeepCopyObject(), gone: true}, nil
	}
	na := mustAccessor(next)
	now := s.now()
	na.SetDeletionTimestamp(&now)
	na.SetDeletionGracePeriodSeconds(new(int64))
	na.SetGeneration(oa.GetGeneration() + 1)
	s.commitLocked(r, k, watch.Modified, next, old)
	return deleted{obj: next.DeepCopyObject()}, nil
}

// setStatus sets dst's Status field to src's (to its zero value when src
// is nil). Types without a Status field are left alone.
func setStatus(dst, src runtime.Object) {
	d := reflect.ValueOf(dst).Elem().FieldByName("Status")
	if !d.IsValid() {
		return
	}
	if src == nil {
		d.SetZero()
		return
	}
	d.Set(reflect.ValueOf(src).Elem().FieldByName("Status"))
}

// specOf is obj without its metadata and, with a status subresource, its
// status: what a change of bumps metadata.generation.
func specOf(r *resource, obj runtime.Object) runtime.Object {
	cp := obj.DeepCopyObject()
	v := reflect.ValueOf(cp).Elem()
	if f := v.FieldByName("ObjectMeta"); f.IsValid() {
		f.SetZero()
	}
	if f := v.FieldByName("TypeMeta"); f.IsValid() {
		f.SetZero()
	}
	if r.status {
		setStatus(cp, nil)
	}
	return cp
}

// mustAccessor is the object's metadata; every stored type has some (the
// resource table admits only those).
func mustAccessor(obj runtime.Object) metav1.Object {
	a, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("kloopfake: %T has no object metadata: %v", obj, err))
	}
	return a
}
