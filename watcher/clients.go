package watcher

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
)

// typedClient is the List/Watch pair every client-go typed client has, for
// example kubernetes.Interface.CoreV1().ConfigMaps(namespace). L is the list
// type (*corev1.ConfigMapList).
type typedClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error)
}

// listObject is what FromClient needs of a list type: list metadata and an
// Items field holding the element type by value (as every Kubernetes list
// type has).
type listObject interface {
	runtime.Object
	GetResourceVersion() string
	GetContinue() string
}

// FromClient returns a ListerWatcher over a client-go typed client:
//
//	lw := watcher.FromClient[*corev1.ConfigMap](clientset.CoreV1().ConfigMaps("default"), watcher.Scope{
//		LabelSelector: "app=web",
//	})
//
// A dynamic or a metadata client's resource is such a client too: over
// dynamicClient.Resource(gvr).Namespace(ns) it lists and watches
// unstructured objects of any resource, CRDs included, with no Go types at
// all; over metadataClient.Resource(gvr) only their metadata
// (*metav1.PartialObjectMetadata), the cheapest way to cache objects whose
// metadata is all a controller reads:
//
//	lw := watcher.FromClient[*metav1.PartialObjectMetadata](metadataClient.Resource(gvr), watcher.Scope{})
//
// The namespace is the typed client's; opts.Namespace must be empty (it
// panics otherwise, as it does when L has no Items field of type []E).
// Items are taken from the list without per-item reflection; each is copied
// into its own allocation so that one cached object does not keep a whole
// LIST response alive.
func FromClient[T interface {
	*E
	Object
}, E any, L listObject](c interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error)
}, opts Scope) ListerWatcher[T] {
	if opts.Namespace != "" {
		panic("watcher.FromClient: Options.Namespace must be empty; the typed client chooses the namespace")
	}
	idx, err := itemsField[E](reflect.TypeFor[L]())
	if err != nil {
		panic("watcher.FromClient: " + err.Error())
	}
	return &clientLW[T, E, L]{client: c, opts: opts, items: idx}
}

// FromResource returns a ListerWatcher for a Go type T served at gvr, with no
// generated clientset: a REST client is built from cfg, and scheme must know
// T and its list type (Kind + "List") in gvr's group and version, as a CRD's
// AddToScheme provides. It works for built-in types too (with
// k8s.io/client-go/kubernetes/scheme.Scheme).
//
// Requests use cfg's content type (JSON when unset, which custom resources
// need); with client-go's ClientsAllowCBOR feature gate on
// (KUBE_FEATURE_ClientsAllowCBOR=true), a cfg that accepts CBOR gets it
// decoded too. With protobuf, objects are decoded straight from LIST responses
// and watch streams without intermediate copies, their namespace strings
// are shared. Objects are decoded whole unless opts.Decoding says what to
// leave out or share: an informer over FromResource (informer.OfResource)
// leaves managedFields out and shares label sets while decoding, as
// informer.Memory chooses.
func FromResource[T interface {
	*E
	Object
}, E any](cfg *rest.Config, scheme *runtime.Scheme, gvr schema.GroupVersionResource, opts Scope) (ListerWatcher[T], error) {
	gv := gvr.GroupVersion()
	kinds, _, err := scheme.ObjectKinds(T(new(E)))
	if err != nil {
		return nil, fmt.Errorf("watcher.FromResource %s: %w", gvr, err)
	}
	var objGVK, listGVK schema.GroupVersionKind
	for _, k := range kinds {
		if k.GroupVersion() == gv {
			objGVK, listGVK = k, gv.WithKind(k.Kind+"List")
		}
	}
	if listGVK.Empty() {
		return nil, fmt.Errorf("watcher.FromResource %s: scheme does not register %T in %s", gvr, T(nil), gv)
	}
	list, err := scheme.New(listGVK)
	if err != nil {
		return nil, fmt.Errorf("watcher.FromResource %s: %w", gvr, err)
	}
	listType := reflect.TypeOf(list)
	if _, ok := list.(listObject); !ok {
		return nil, fmt.Errorf("watcher.FromResource %s: %v has no list metadata", gvr, listType)
	}
	idx, err := itemsField[E](listType)
	if err != nil {
		return nil, fmt.Errorf("watcher.FromResource %s: %w", gvr, err)
	}

	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	codecs := serializer.NewCodecFactory(scheme)
	if clientfeatures.FeatureGates().Enabled(clientfeatures.ClientsAllowCBOR) {
		// What client-go's generated clients do under the same gate
		// (rest.CodecFactoryForGeneratedClient): a CBOR answer, which
		// cfg may accept, can be decoded.
		codecs = serializer.NewCodecFactory(scheme, serializer.WithSerializer(cbor.NewSerializerInfo))
	}
	c.NegotiatedSerializer = withFastProtobuf[T](codecs.WithoutConversion(), objGVK, listGVK, listType, opts)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("watcher.FromResource %s: %w", gvr, err)
	}
	client := &restClient{
		client:    rc,
		namespace: opts.Namespace,
		resource:  gvr.Resource,
		newList:   func() listObject { return reflect.New(listType.Elem()).Interface().(listObject) },
	}
	opts.Namespace = ""
	return &clientLW[T, E, listObject]{client: client, opts: opts, items: idx}, nil
}

// clientLW adapts a typedClient to ListerWatcher[T].
type clientLW[T interface {
	*E
	Object
}, E any, L listObject] struct {
	client typedClient[L]
	opts   Scope
	items  []int // field index of Items in *L's struct
}

func (c *clientLW[T, E, L]) List(ctx context.Context, opts metav1.ListOptions) (ListPage[T], error) {
	c.opts.apply(&opts)
	list, err := c.client.List(ctx, opts)
	if err != nil {
		return ListPage[T]{}, err
	}
	v := reflect.ValueOf(list)
	if !v.IsValid() || v.IsNil() {
		return ListPage[T]{}, fmt.Errorf("%w: nil list", ErrUnexpectedObject)
	}
	items := v.Elem().FieldByIndex(c.items).Interface().([]E)
	out := make([]T, len(items))
	for i := range items {
		p := new(E)
		*p = items[i]
		out[i] = p
	}
	page := ListPage[T]{Items: out, ResourceVersion: list.GetResourceVersion(), Continue: list.GetContinue()}
	page.ListMeta = listMetaOf(list)
	return page, nil
}

func (c *clientLW[T, E, L]) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	c.opts.apply(&opts)
	return c.client.Watch(ctx, opts)
}

// listMetaOf copies a list's metadata: all of it for typed and
// unstructured lists, the resourceVersion and continue token of others.
func listMetaOf(list listObject) metav1.ListMeta {
	switch l := any(list).(type) {
	case metav1.ListMetaAccessor:
		if lm, ok := l.GetListMeta().(*metav1.ListMeta); ok && lm != nil {
			return *lm
		}
	case *unstructured.UnstructuredList:
		var lm metav1.ListMeta
		if m, ok := l.Object["metadata"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &lm); err == nil {
				return lm
			}
		}
	}
	return metav1.ListMeta{ResourceVersion: list.GetResourceVersion(), Continue: list.GetContinue()}
}

// itemsField finds the Items []E field of the list type lt (a pointer to a
// struct).
func itemsField[E any](lt reflect.Type) ([]int, error) {
	if lt.Kind() != reflect.Pointer || lt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("list type %v is not a pointer to a struct", lt)
	}
	f, ok := lt.Elem().FieldByName("Items")
	if !ok || f.Type != reflect.TypeFor[[]E]() {
		return nil, fmt.Errorf("list type %v has no field Items of type %v", lt, reflect.TypeFor[[]E]())
	}
	return f.Index, nil
}

// paramCodec encodes metav1.ListOptions as query parameters, independently of
// the user's scheme (which may not register the meta types).
var paramCodec = func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, metaV1)
	return runtime.NewParameterCodec(s)
}()

var metaV1 = schema.GroupVersion{Version: "v1"}

// restClient is a typedClient over a plain REST client, for FromResource.
type restClient struct {
	client    *rest.RESTClient
	namespace string
	resource  string
	newList   func() listObject
}

func (c *restClient) List(ctx context.Context, opts metav1.ListOptions) (listObject, error) {
	list := c.newList()
	err := c.client.Get().
		NamespaceIfScoped(c.namespace, c.namespace != "").
		Resource(c.resource).
		SpecificallyVersionedParams(&opts, paramCodec, metaV1).
		Do(ctx).
		Into(list)
	if err != nil {
		return nil, err
	}
	return list, nil
}

func (c *restClient) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return c.client.Get().
		NamespaceIfScoped(c.namespace, c.namespace != "").
		Resource(c.resource).
		SpecificallyVersionedParams(&opts, paramCodec, metaV1).
		Timeout(timeout).
		Watch(ctx)
}

// fastProtobuf is a NegotiatedSerializer whose protobuf decoders take the
// short cuts of protobuf.go for T.
type fastProtobuf struct {
	runtime.NegotiatedSerializer
	types []runtime.SerializerInfo
}

func withFastProtobuf[T interface {
	*E
	Object
}, E any](ns runtime.NegotiatedSerializer, gvk, listGVK schema.GroupVersionKind, listType reflect.Type, opts Scope) runtime.NegotiatedSerializer {
	types := slices.Clone(ns.SupportedMediaTypes())
	found := false
	for i := range types {
		info := &types[i]
		if info.MediaType != runtime.ContentTypeProtobuf || info.Serializer == nil {
			continue
		}
		found = true
		info.Serializer = newTypedDecoder[T](info.Serializer, gvk, listGVK, listType, opts)
		if info.StreamSerializer != nil && info.StreamSerializer.Serializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = watchEventDecoder{stream.Serializer}
			info.StreamSerializer = &stream
		}
	}
	if !found {
		return ns
	}
	return fastProtobuf{NegotiatedSerializer: ns, types: types}
}

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (f fastProtobuf) SupportedMediaTypes() []runtime.SerializerInfo { return f.types }
