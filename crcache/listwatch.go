package crcache

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kloop-dev/kloop/watcher"
)

// dynamicLW lists and watches a kind whose Go type is known only at run
// time (from the scheme), for an Informer[client.Object].
type dynamicLW struct {
	client    rest.Interface
	params    runtime.ParameterCodec
	resource  string
	namespace string
	label     string
	field     string
	newList   func() runtime.Object
	elem      reflect.Type // the item type, a struct
}

var _ watcher.ListerWatcher[client.Object] = (*dynamicLW)(nil)

func newDynamicLW(c partConfig, sample runtime.Object) (*dynamicLW, error) {
	listGVK := c.gvk.GroupVersion().WithKind(c.gvk.Kind + "List")
	list, err := c.scheme.New(listGVK)
	if err != nil {
		return nil, err
	}
	items := reflect.ValueOf(list).Elem().FieldByName("Items")
	elem := reflect.TypeOf(sample).Elem()
	if !items.IsValid() || items.Type() != reflect.SliceOf(elem) {
		return nil, fmt.Errorf("crcache: %T has no Items of type []%v", list, elem)
	}
	codecs := serializer.NewCodecFactory(c.scheme)
	rc, err := apiutil.RESTClientForGVK(c.gvk, false, false, c.restConfig, codecs, c.httpClient)
	if err != nil {
		return nil, err
	}
	return &dynamicLW{
		client:    rc,
		params:    runtime.NewParameterCodec(c.scheme),
		resource:  c.gvr.Resource,
		namespace: c.namespace,
		label:     c.label,
		field:     c.field,
		newList:   func() runtime.Object { return list.DeepCopyObject() },
		elem:      elem,
	}, nil
}

func (d *dynamicLW) scope(opts *metav1.ListOptions) {
	opts.LabelSelector, opts.FieldSelector = d.label, d.field
}

func (d *dynamicLW) List(ctx context.Context, opts metav1.ListOptions) (watcher.ListPage[client.Object], error) {
	d.scope(&opts)
	list := d.newList()
	err := d.client.Get().
		NamespaceIfScoped(d.namespace, d.namespace != "").
		Resource(d.resource).
		VersionedParams(&opts, d.params).
		Do(ctx).
		Into(list)
	if err != nil {
		return watcher.ListPage[client.Object]{}, err
	}
	items := reflect.ValueOf(list).Elem().FieldByName("Items")
	out := make([]client.Object, items.Len())
	for i := range out {
		// Each item in an allocation of its own, so that a cached object
		// does not keep the whole LIST response alive.
		p := reflect.New(d.elem)
		p.Elem().Set(items.Index(i))
		out[i] = p.Interface().(client.Object)
	}
	page := watcher.ListPage[client.Object]{Items: out}
	if lm, ok := list.(metav1.ListInterface); ok {
		page.ResourceVersion, page.Continue = lm.GetResourceVersion(), lm.GetContinue()
		page.ListMeta = metav1.ListMeta{ResourceVersion: page.ResourceVersion, Continue: page.Continue, RemainingItemCount: lm.GetRemainingItemCount()}
	}
	return page, nil
}

func (d *dynamicLW) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	d.scope(&opts)
	opts.Watch = true
	return d.client.Get().
		NamespaceIfScoped(d.namespace, d.namespace != "").
		Resource(d.resource).
		VersionedParams(&opts, d.params).
		Watch(ctx)
}
