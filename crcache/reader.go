package crcache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kloop-dev/kloop/cache"
)

// errNoContinue is what List says to a continue token: a cache has no
// pages to continue.
var errNoContinue = errors.New("continue list option is not supported by the cache")

// readEntry returns the synced entry for key, or why there is none.
func (c *Cache) readEntry(ctx context.Context, key entryKey) (*entry, error) {
	e, started, err := c.entryFor(key, c.failOnMissing)
	if err != nil {
		return nil, err
	}
	if !started {
		return nil, &crcache.ErrCacheNotStarted{}
	}
	if err := e.waitForSync(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Get reads the object key into out from the cache: a deep copy, unless
// UnsafeDisableDeepCopy is set for the kind or the call.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(out, c.scheme)
	if err != nil {
		return err
	}
	e, err := c.readEntry(ctx, entryKey{gvk, classOf(out)})
	if err != nil {
		return err
	}
	var o client.GetOptions
	o.ApplyOptions(opts)
	if !e.namespaced {
		key.Namespace = ""
	}
	p, ok := e.partFor(key.Namespace)
	if !ok {
		return fmt.Errorf("unable to get: %v because of unknown namespace for the cache", key)
	}
	obj, ok := p.get(key.Namespace, key.Name)
	if !ok {
		// controller-runtime names the kind where the resource belongs.
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	copied := !p.noCopy && (o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy)
	if copied {
		obj = obj.DeepCopyObject().(client.Object)
	}
	ov, cv := reflect.ValueOf(out), reflect.ValueOf(obj)
	if !cv.Type().AssignableTo(ov.Type()) {
		return fmt.Errorf("cache had type %s, but %s was asked for", cv.Type(), ov.Type())
	}
	reflect.Indirect(ov).Set(reflect.Indirect(cv))
	if copied {
		out.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return nil
}

// List reads the objects that opts select into list: deep copies, unless
// UnsafeDisableDeepCopy is set for the kind or the call. It honours what
// controller-runtime's cache honours: Namespace, LabelSelector,
// FieldSelector with exact matches on indexed fields (IndexField), Limit
// (without a continue token: a cache has no pages), UnsafeDisableDeepCopy.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, c.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	class := classOf(list)
	if class == classTyped {
		if _, err := c.scheme.New(gvk); err != nil {
			return err
		}
	}
	e, err := c.readEntry(ctx, entryKey{gvk, class})
	if err != nil {
		return err
	}
	var o client.ListOptions
	o.ApplyOptions(opts)
	if o.Continue != "" {
		return errNoContinue
	}
	var reqs fields.Requirements
	if o.FieldSelector != nil {
		reqs = o.FieldSelector.Requirements()
		if len(reqs) == 0 {
			return errors.New("non-exact field matches are not supported by the cache")
		}
		for _, r := range reqs {
			if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
				return errors.New("non-exact field matches are not supported by the cache")
			}
		}
	}
	ns := o.Namespace
	parts := e.parts
	if ns != "" && e.namespaced {
		p, ok := e.partFor(ns)
		if !ok {
			return fmt.Errorf("unable to list: %v because of unknown namespace for the cache", ns)
		}
		parts = []*partEntry{p}
	}
	var items []runtime.Object
	for _, p := range parts {
		objs, err := p.selectObjects(ns, o, reqs)
		if err != nil {
			return err
		}
		copied := !p.noCopy && (o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy)
		for _, obj := range objs {
			if o.Limit > 0 && int64(len(items)) >= o.Limit {
				break
			}
			if copied {
				obj = obj.DeepCopyObject().(client.Object)
				obj.GetObjectKind().SetGroupVersionKind(gvk)
			}
			items = append(items, obj)
		}
	}
	if err := apimeta.SetList(list, items); err != nil {
		return err
	}
	list.SetContinue("continue-not-supported")
	return nil
}

// selectObjects returns the part's objects in namespace ns (all if "")
// that o's label selector and the field requirements select. They are
// the cache's: read-only.
func (p *partEntry) selectObjects(ns string, o client.ListOptions, reqs fields.Requirements) ([]client.Object, error) {
	if len(reqs) == 0 {
		return p.list(ns, o.LabelSelector), nil
	}
	var objs []client.Object
	for i, r := range reqs {
		found, err := p.byIndex(fieldIndexName(r.Field), namespacedKey(ns, r.Value))
		if errors.Is(err, cache.ErrUnknownIndex) {
			return nil, fmt.Errorf("index with name %s does not exist (add it with IndexField): %w", fieldIndexName(r.Field), err)
		}
		if err != nil {
			return nil, err
		}
		if i == 0 {
			objs = found
		} else {
			objs = intersect(objs, found)
		}
		if len(objs) == 0 {
			return nil, nil
		}
	}
	if o.LabelSelector == nil || o.LabelSelector.Empty() {
		return objs, nil
	}
	out := objs[:0]
	for _, obj := range objs {
		if o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, obj)
		}
	}
	return out, nil
}

func intersect(a, b []client.Object) []client.Object {
	keys := make(map[cache.Key]struct{}, len(b))
	for _, o := range b {
		keys[cache.KeyOf(o)] = struct{}{}
	}
	out := a[:0]
	for _, o := range a {
		if _, ok := keys[cache.KeyOf(o)]; ok {
			out = append(out, o)
		}
	}
	return out
}
