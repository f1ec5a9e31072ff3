package client

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/ownwrite"
	"github.com/kloop-dev/kloop/watcher"
)

// Resource reads and writes objects of one Go type T served at one
// GroupVersionResource, built-in or custom. Get it from NewResource. It is safe for
// concurrent use.
//
// Every method talks to the API server; nothing is cached. Errors are the API
// server's, so apierrors.IsNotFound, IsConflict, IsAlreadyExists and the like
// work on them. Objects passed in are not modified; objects returned belong to
// the caller.
//
// Namespace arguments are "" for cluster-scoped resources. Every successful
// write is recorded by the client with the resourceVersion the
// server returned (see CachedReader).
type Resource[T watcher.Object] struct {
	c       *Client
	rc      *rest.RESTClient
	gvr     schema.GroupVersionResource
	gvk     schema.GroupVersionKind
	newObj  func() T
	newList func() runtime.Object
	items   []int // field index of Items in the list struct
}

// NewResource returns the Resource for T at gvr. The client's scheme must register T
// and its list type (T's kind + "List") in gvr's group and version:
//
//	pods, err := client.NewResource[*corev1.Pod](c, corev1.SchemeGroupVersion.WithResource("pods"))
//
// It does no I/O. T may be *unstructured.Unstructured, for a kind the
// scheme does not register: its objects carry their apiVersion and kind,
// and lists are read as an UnstructuredList.
func NewResource[T interface {
	*E
	watcher.Object
}, E any](c *Client, gvr schema.GroupVersionResource) (*Resource[T], error) {
	gv := gvr.GroupVersion()
	if _, ok := any(T(new(E))).(*unstructured.Unstructured); ok {
		rc, err := c.restFor(gv, false)
		if err != nil {
			return nil, fmt.Errorf("client.NewResource %s: %w", gvr, err)
		}
		f, _ := reflect.TypeFor[unstructured.UnstructuredList]().FieldByName("Items")
		return &Resource[T]{c: c, rc: rc, gvr: gvr, gvk: gv.WithKind(""), newObj: func() T { return T(new(E)) },
			newList: func() runtime.Object { return &unstructured.UnstructuredList{} }, items: f.Index}, nil
	}
	kinds, _, err := c.scheme.ObjectKinds(T(new(E)))
	if err != nil {
		return nil, fmt.Errorf("client.NewResource %s: %w", gvr, err)
	}
	var gvk schema.GroupVersionKind
	for _, k := range kinds {
		if k.GroupVersion() == gv {
			gvk = k
		}
	}
	if gvk.Empty() {
		return nil, fmt.Errorf("client.NewResource %s: the scheme does not register %T in %s", gvr, T(nil), gv)
	}
	list, err := c.scheme.New(gv.WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("client.NewResource %s: list type: %w", gvr, err)
	}
	lt := reflect.TypeOf(list)
	if lt.Kind() != reflect.Pointer || lt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("client.NewResource %s: list type %v is not a pointer to a struct", gvr, lt)
	}
	f, ok := lt.Elem().FieldByName("Items")
	if !ok || f.Type != reflect.TypeFor[[]E]() {
		return nil, fmt.Errorf("client.NewResource %s: list type %v has no field Items of type %v", gvr, lt, reflect.TypeFor[[]E]())
	}
	if _, ok := list.(metav1.ListInterface); !ok {
		return nil, fmt.Errorf("client.NewResource %s: list type %v has no list metadata", gvr, lt)
	}
	_, proto := any(T(new(E))).(interface {
		Reset()
		Marshal() ([]byte, error)
		Unmarshal([]byte) error
	})
	rc, err := c.restFor(gv, proto)
	if err != nil {
		return nil, fmt.Errorf("client.NewResource %s: %w", gvr, err)
	}
	return &Resource[T]{
		c:       c,
		rc:      rc,
		gvr:     gvr,
		gvk:     gvk,
		newObj:  func() T { return T(new(E)) },
		newList: func() runtime.Object { return reflect.New(lt.Elem()).Interface().(runtime.Object) },
		items:   f.Index,
	}, nil
}

// into decodes a response into out. Unstructured content is decoded as it
// is: the scheme's decoder would drop its apiVersion and kind.
func (r *Resource[T]) into(res rest.Result, out runtime.Object) error {
	if r.gvk.Kind != "" {
		return res.Into(out)
	}
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	return out.(json.Unmarshaler).UnmarshalJSON(raw)
}

func (r *Resource[T]) req(verb, namespace string) *rest.Request {
	return r.rc.Verb(verb).NamespaceIfScoped(namespace, namespace != "").Resource(r.gvr.Resource)
}

// Get reads namespace/name from the API server.
func (r *Resource[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	out := r.newObj()
	if err := r.into(r.req("GET", namespace).Name(name).Do(ctx), out); err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// List reads the objects in namespace ("" means all namespaces, or the
// resource is cluster-scoped) that match opts' label and field selectors,
// and returns them with the list's resourceVersion. When opts.Limit is set it
// is the page size: List follows continue tokens and returns every page.
func (r *Resource[T]) List(ctx context.Context, namespace string, opts metav1.ListOptions) ([]T, string, error) {
	var out []T
	for {
		list := r.newList()
		err := r.into(r.req("GET", namespace).
			SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
			Do(ctx), list)
		if err != nil {
			return nil, "", err
		}
		items := reflect.ValueOf(list).Elem().FieldByIndex(r.items)
		if out == nil {
			out = make([]T, 0, items.Len())
		}
		for i := range items.Len() {
			out = append(out, items.Index(i).Addr().Interface().(T))
		}
		meta := list.(metav1.ListInterface)
		if meta.GetContinue() == "" {
			return out, meta.GetResourceVersion(), nil
		}
		opts.Continue = meta.GetContinue()
		opts.ResourceVersion = ""
	}
}

// Create creates obj in obj's namespace and returns the object the server
// stored.
func (r *Resource[T]) Create(ctx context.Context, obj T) (T, error) {
	return r.write(ctx, "POST", obj.GetNamespace(), "", "", obj)
}

// Update replaces the object with obj. obj's resourceVersion is a
// precondition: when the object changed since it was read, the server
// answers with a conflict (apierrors.IsConflict). Changes to the status are
// ignored for resources with a status subresource; use UpdateStatus.
func (r *Resource[T]) Update(ctx context.Context, obj T) (T, error) {
	return r.write(ctx, "PUT", obj.GetNamespace(), obj.GetName(), "", obj)
}

// UpdateStatus replaces the status of the object through the status
// subresource; everything else in obj is ignored. Like Update, it fails with
// a conflict when obj's resourceVersion is not current.
func (r *Resource[T]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	return r.write(ctx, "PUT", obj.GetNamespace(), obj.GetName(), "status", obj)
}

func (r *Resource[T]) write(ctx context.Context, verb, namespace, name, subresource string, obj T) (_ T, err error) {
	spanVerb := "update"
	if verb == "POST" {
		spanVerb, name = "create", ""
	}
	ctx, span := r.startSpan(ctx, spanVerb, namespace, cmp.Or(name, obj.GetName()), subresource)
	out := r.newObj()
	defer func() { r.endSpan(span, out, err) }()
	req := r.req(verb, namespace).
		Param("fieldManager", r.c.fieldManager).
		Body(obj)
	if name != "" {
		req = req.Name(name)
	}
	if subresource != "" {
		req = req.SubResource(subresource)
	}
	if err := r.into(req.Do(ctx), out); err != nil {
		var zero T
		return zero, err
	}
	r.track(ctx, out)
	return out, nil
}

// PatchOptions modify Patch and Apply. The zero value patches the object
// itself and does not force.
type PatchOptions struct {
	// Subresource to patch, such as "status". Default: the object itself.
	Subresource string
	// Force, for server-side apply only, takes ownership of fields that
	// another field manager owns instead of failing with a conflict.
	Force bool
	// ResourceVersion, for Apply only, is a precondition: the apply fails
	// with a Conflict unless the object is at this resourceVersion (it
	// sets the configuration's metadata.resourceVersion).
	ResourceVersion string
}

// Patch applies a patch to namespace/name and returns the patched object.
// pt is types.MergePatchType (RFC 7386), types.JSONPatchType (RFC 6902),
// types.StrategicMergePatchType (built-in types only) or
// types.ApplyPatchType (server-side apply, with the client's field manager;
// see also Apply).
func (r *Resource[T]) Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts PatchOptions) (_ T, err error) {
	verb := "patch"
	if pt == types.ApplyPatchType {
		verb = "apply"
	}
	ctx, span := r.startSpan(ctx, verb, namespace, name, opts.Subresource)
	out := r.newObj()
	defer func() { r.endSpan(span, out, err) }()
	req := r.rc.Patch(pt).
		NamespaceIfScoped(namespace, namespace != "").
		Resource(r.gvr.Resource).
		Name(name).
		Param("fieldManager", r.c.fieldManager).
		Body(data)
	if opts.Subresource != "" {
		req = req.SubResource(opts.Subresource)
	}
	if opts.Force && pt == types.ApplyPatchType {
		req = req.Param("force", "true")
	}
	if err := r.into(req.Do(ctx), out); err != nil {
		var zero T
		return zero, err
	}
	r.track(ctx, out)
	return out, nil
}

// Apply sends cfg, a server-side apply configuration, and returns the
// object the server stored: the client's field manager becomes the owner
// of every field cfg sets, fields it owned before but cfg no longer sets
// are removed, and the object is created when it does not exist. Only
// what cfg sets is sent, so build it with an apply configuration:
// client-go's for built-in kinds (k8s.io/client-go/applyconfigurations),
// controller-gen's (applyconfiguration) for your own, such as
//
//	appsv1ac.Deployment("web", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(0))
//
// not a typed object, which also sends its zero values (selector: null)
// and would own them. cfg names the object (metadata.name and namespace);
// its apiVersion and kind are the resource's when it leaves them out; a
// metadata.resourceVersion it sets is a precondition. opts.Force takes
// fields other managers own instead of failing with a conflict;
// opts.Subresource "status" applies the status.
func (r *Resource[T]) Apply(ctx context.Context, cfg runtime.ApplyConfiguration, opts PatchOptions) (T, error) {
	var zero T
	body, ns, name, err := applyBody(cfg, r.gvk, opts.ResourceVersion)
	if err != nil {
		return zero, fmt.Errorf("client: apply %s: %w", r.gvk.Kind, err)
	}
	return r.Patch(ctx, ns, name, types.ApplyPatchType, body, opts)
}

// ApplyConfigurationFromUnstructured returns u as an apply configuration,
// for the kinds a program knows only at run time: Apply sends u as it is,
// so u must set its apiVersion and kind, and should set only the fields the
// program owns; build it anew rather than
// from an object read from a cache, which holds every field. A nil u is no
// configuration (Apply says so).
func ApplyConfigurationFromUnstructured(u *unstructured.Unstructured) runtime.ApplyConfiguration {
	if u == nil {
		return nil
	}
	return unstructuredConfig{u}
}

type unstructuredConfig struct{ u *unstructured.Unstructured }

func (unstructuredConfig) IsApplyConfiguration()          {}
func (c unstructuredConfig) MarshalJSON() ([]byte, error) { return json.Marshal(c.u.Object) }

// applyBody encodes cfg as an apply patch, with apiVersion and kind filled
// in from gvk where cfg leaves them out and no managedFields (the API
// server refuses them in an apply), and returns the object's namespace and
// name.
func applyBody(cfg runtime.ApplyConfiguration, gvk schema.GroupVersionKind, rv string) (body []byte, namespace, name string, err error) {
	if cfg == nil || reflect.ValueOf(cfg).Kind() == reflect.Pointer && reflect.ValueOf(cfg).IsNil() {
		return nil, "", "", fmt.Errorf("no apply configuration")
	}
	obj, err := applyContent(cfg)
	if err != nil {
		return nil, "", "", err
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ = md["name"].(string)
	namespace, _ = md["namespace"].(string)
	if name == "" {
		return nil, "", "", fmt.Errorf("the apply configuration has no metadata.name: build it with its kind's constructor, such as appsv1ac.Deployment(name, namespace)")
	}
	delete(md, "managedFields")
	if rv != "" {
		md["resourceVersion"] = rv
	}
	if v, _ := obj["apiVersion"].(string); v == "" {
		obj["apiVersion"] = gvk.GroupVersion().String()
	}
	if k, _ := obj["kind"].(string); k == "" {
		if gvk.Kind == "" {
			return nil, "", "", fmt.Errorf("the apply configuration of %s has no kind: set apiVersion and kind (such as u.SetGroupVersionKind(gvk))", gvk.GroupVersion())
		}
		obj["kind"] = gvk.Kind
	}
	body, err = json.Marshal(obj)
	return body, namespace, name, err
}

// applyContent returns cfg as the object an apply sends, a map of its
// own. The generated configurations (pointers to structs of optional
// fields) are walked as runtime's unstructured converter walks objects,
// not encoded: encoding/json would keep an encoder for every type
// reachable from the configuration's (from a pod template, all of core/v1's
// apply configurations: some 300 KB for the life of the program), where
// the walk keeps the fields of the types it meets. A configuration that
// encodes itself (a json.Marshaler, as unstructured content is) is decoded
// from its encoding.
func applyContent(cfg runtime.ApplyConfiguration) (map[string]any, error) {
	if _, ok := cfg.(json.Marshaler); !ok && reflect.ValueOf(cfg).Kind() == reflect.Pointer {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
		if err != nil {
			return nil, fmt.Errorf("convert the apply configuration: %w", err)
		}
		return obj, nil
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the apply configuration: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("decode the apply configuration: %w", err)
	}
	return obj, nil
}

// Delete deletes namespace/name. The delete is recorded as a write: when the
// server returns the object (custom resources, objects waiting on
// finalizers or a grace period) a CachedReader waits for its
// resourceVersion, so it sees the deletionTimestamp or the object gone;
// when the server returns only a Status (most built-in resources) it waits
// until the cache no longer holds the object with the deleted UID. A dry
// run (opts.DryRun) is not recorded.
func (r *Resource[T]) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) (err error) {
	ctx, span := r.startSpan(ctx, "delete", namespace, name, "")
	defer func() { r.endSpan(span, nil, err) }()
	// JSON both ways, whatever the resource's content type: the body is
	// read below as JSON.
	raw, err := r.req("DELETE", namespace).Name(name).Body(mustJSON(opts)).
		SetHeader("Content-Type", runtime.ContentTypeJSON).SetHeader("Accept", runtime.ContentTypeJSON).Do(ctx).Raw()
	if err != nil || len(opts.DryRun) > 0 {
		return err // a dry run changed nothing for a cache to see
	}
	// The body is the object (deleted, or waiting on finalizers), or, for
	// most built-in resources, a Status naming the deleted object's UID.
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Details struct {
			UID types.UID `json:"uid"`
		} `json:"details"`
	}
	key := cache.Key{Namespace: namespace, Name: name}
	switch {
	case json.Unmarshal(raw, &head) != nil:
		r.c.tracker.RecordGone(r.gvr.GroupResource(), key, "")
	case head.Kind == "Status" || head.Metadata.ResourceVersion == "":
		r.c.tracker.RecordGone(r.gvr.GroupResource(), key, head.Details.UID)
	default:
		r.c.tracker.Record(r.gvr.GroupResource(), key, head.Metadata.ResourceVersion)
	}
	return nil
}

// track records the write that returned obj, and reports it to the
// reconcile whose ctx it was made with (internal/ownwrite), so that the
// reconcile's controller knows the watch event of its own write.
func (r *Resource[T]) track(ctx context.Context, obj T) {
	// A write that takes the last finalizer off an object being deleted
	// (with no grace period left) deletes it, and the API server returns it
	// at its last resourceVersion, which the cache holds already: wait for
	// it to be gone instead.
	if g := obj.GetDeletionGracePeriodSeconds(); obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 && (g == nil || *g == 0) {
		r.c.tracker.RecordGone(r.gvr.GroupResource(), cache.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, obj.GetUID())
		return
	}
	r.c.tracker.RecordObject(r.gvr.GroupResource(), obj)
	ownwrite.Report(ctx, obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion())
}

// mustJSON encodes DeleteOptions with its kind, as the API server expects in
// a DELETE body. It cannot fail for that type.
func mustJSON(opts metav1.DeleteOptions) []byte {
	opts.TypeMeta = metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}
	data, err := json.Marshal(opts)
	if err != nil {
		panic(err)
	}
	return data
}
