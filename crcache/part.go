package crcache

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// part is one kloop informer behind a controller-runtime informer: the
// objects of one kind in one namespace (or in all of them), with the
// selectors and transform that namespace's configuration gives. A kind
// cached in several namespaces has one part per namespace, as
// controller-runtime's own cache has one informer per namespace.
//
// Objects a part hands out are the informer's: read-only.
type part interface {
	// namespace is the part's namespace, "" for all namespaces (or a
	// cluster-scoped kind).
	namespace() string
	get(namespace, name string) (client.Object, bool)
	list(namespace string, selector labels.Selector) []client.Object
	byIndex(index, value string) ([]client.Object, error)
	addIndex(name string, fn func(client.Object) []string) error
	addHandler(h func(cache.Event[client.Object]), opts informer.HandlerOptions) (*informer.Registration, error)
	synced() <-chan struct{}
	waitForSync(ctx context.Context) error
	// run runs the informer until ctx is done.
	run(ctx context.Context) error
	name() string
}

// partConfig is what a part is made from.
type partConfig struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	class      objectClass
	namespace  string
	label      string
	field      string
	transform  func(client.Object) client.Object
	memory     informer.Memory
	scheme     *runtime.Scheme
	restConfig *rest.Config
	httpClient *http.Client // for dynamic parts
	logger     *slog.Logger
	registerer prometheus.Registerer
}

// typedPart is a part over an informer of the Go type T: a type this
// package knows at compile time (the common built-in kinds, unstructured
// objects, object metadata), which gets kloop's whole decoding path, or
// client.Object itself for the kinds it does not know (a program's custom
// resources), decoded by the scheme.
type typedPart[T watcher.Object] struct {
	ns  string
	inf *informer.Informer[T]
	// start runs what owns the informer: a factory of its own, or the
	// informer itself.
	start func(ctx context.Context) error
}

func (p *typedPart[T]) namespace() string { return p.ns }
func (p *typedPart[T]) name() string      { return p.inf.Name() }

func (p *typedPart[T]) get(namespace, name string) (client.Object, bool) {
	obj, ok := p.inf.Lister().Get(namespace, name)
	if !ok {
		return nil, false
	}
	return any(obj).(client.Object), true
}

func (p *typedPart[T]) list(namespace string, selector labels.Selector) []client.Object {
	return objects(p.inf.Lister().ListInNamespace(namespace, selector))
}

func (p *typedPart[T]) byIndex(index, value string) ([]client.Object, error) {
	objs, err := p.inf.Lister().ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	return objects(objs), nil
}

func (p *typedPart[T]) addIndex(name string, fn func(client.Object) []string) error {
	return p.inf.AddIndex(name, func(obj T) []string { return fn(any(obj).(client.Object)) })
}

func (p *typedPart[T]) addHandler(h func(cache.Event[client.Object]), opts informer.HandlerOptions) (*informer.Registration, error) {
	return p.inf.AddHandler(eventAdapter[T](h), opts)
}

func (p *typedPart[T]) synced() <-chan struct{}               { return p.inf.Synced() }
func (p *typedPart[T]) waitForSync(ctx context.Context) error { return p.inf.WaitForSync(ctx) }
func (p *typedPart[T]) run(ctx context.Context) error         { return p.start(ctx) }

// eventAdapter hands a kloop informer's events of T on as events of
// client.Object.
type eventAdapter[T watcher.Object] func(cache.Event[client.Object])

func (f eventAdapter[T]) OnEvent(e cache.Event[T]) {
	var old, new client.Object
	if !isNil(e.Old) {
		old = any(e.Old).(client.Object)
	}
	if !isNil(e.New) {
		new = any(e.New).(client.Object)
	}
	f(cache.Event[client.Object]{Old: old, New: new, Kind: e.Kind, Replay: e.Replay, FinalStateUnknown: e.FinalStateUnknown})
}

func isNil[T watcher.Object](obj T) bool {
	v := any(obj)
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func objects[T watcher.Object](objs []T) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = any(o).(client.Object)
	}
	return out
}

// newPart makes the part for c. Its informer neither runs nor talks to
// the API server until run.
func newPart(c partConfig) (part, error) {
	switch c.class {
	case classUnstructured:
		c.memory.Encoded = false // an encoded cache needs a protobuf type
		return factoryPart[*unstructured.Unstructured](c)
	case classMetadata:
		c.memory.Encoded = false
		return factoryPart[*metav1.PartialObjectMetadata](c)
	}
	obj, err := c.scheme.New(c.gvk)
	if err != nil {
		return nil, err
	}
	if mk, ok := knownTypes[reflect.TypeOf(obj)]; ok {
		return mk(c)
	}
	return dynamicPart(c, obj)
}

// knownTypes are the built-in kinds whose informers are typed at compile
// time, so that they are decoded by kloop's own protobuf path (which
// never allocates the managedFields it strips and shares label sets as it
// decodes) and may be kept encoded (informer.Memory.Encoded). Every other
// kind goes through dynamicPart, whose cache is as lean at rest.
var knownTypes = map[reflect.Type]func(partConfig) (part, error){}

func known[T interface {
	*E
	watcher.Object
}, E any]() {
	knownTypes[reflect.TypeFor[T]()] = factoryPart[T]
}

func init() {
	known[*corev1.ConfigMap]()
	known[*corev1.Secret]()
	known[*corev1.Pod]()
	known[*corev1.Service]()
	known[*corev1.ServiceAccount]()
	known[*corev1.Namespace]()
	known[*corev1.Node]()
	known[*corev1.PersistentVolumeClaim]()
	known[*corev1.PersistentVolume]()
	known[*corev1.Endpoints]()
	known[*corev1.Event]()
	known[*appsv1.Deployment]()
	known[*appsv1.ReplicaSet]()
	known[*appsv1.StatefulSet]()
	known[*appsv1.DaemonSet]()
	known[*batchv1.Job]()
	known[*batchv1.CronJob]()
	known[*coordinationv1.Lease]()
	known[*discoveryv1.EndpointSlice]()
	known[*networkingv1.Ingress]()
	known[*rbacv1.Role]()
	known[*rbacv1.RoleBinding]()
	known[*rbacv1.ClusterRole]()
	known[*rbacv1.ClusterRoleBinding]()
}

// factoryPart makes a part over an informer from a kloop Factory of its
// own: one factory per part, so that RemoveInformer can stop it alone.
func factoryPart[T interface {
	*E
	watcher.Object
}, E any](c partConfig) (part, error) {
	f := informer.NewFactory(c.restConfig, informer.FactoryOptions{
		Scheme:     c.scheme,
		Memory:     c.memory,
		Logger:     c.logger,
		Registerer: c.registerer,
	})
	inf, err := informer.OfResource[T](f, c.gvr, informer.Scope{Namespace: c.namespace, LabelSelector: c.label, FieldSelector: c.field})
	if err != nil {
		return nil, err
	}
	if fn := c.transformFor(); fn != nil {
		if err := inf.SetTransform(func(obj T) T {
			out, ok := fn(any(obj).(client.Object)).(T)
			if !ok {
				return obj
			}
			return out
		}); err != nil {
			return nil, err
		}
	}
	return &typedPart[T]{ns: c.namespace, inf: inf, start: f.Start}, nil
}

// transformFor is the part's transform: metadata-only objects get the
// kind they stand for (the API server sends them as
// PartialObjectMetadata), then the user's transform runs.
func (c partConfig) transformFor() func(client.Object) client.Object {
	user := c.transform
	if c.class != classMetadata {
		return user
	}
	gvk := c.gvk
	return func(obj client.Object) client.Object {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		if user != nil {
			return user(obj)
		}
		return obj
	}
}

// dynamicPart makes a part for a kind whose Go type (that of sample) is
// known only at run time, over an Informer[client.Object] and a
// ListerWatcher that decodes with the scheme.
func dynamicPart(c partConfig, sample runtime.Object) (part, error) {
	lw, err := newDynamicLW(c, sample)
	if err != nil {
		return nil, err
	}
	scope := informer.Scope{Namespace: c.namespace, LabelSelector: c.label, FieldSelector: c.field}
	name := fmt.Sprintf("%s.%s.%s [%s]", c.gvr.Resource, c.gvr.Version, c.gvr.Group, scope)
	src := watcher.NewReflector[client.Object](lw, watcher.Options{Name: name, Logger: c.logger, Registerer: c.registerer})
	mem := c.memory
	mem.Encoded, mem.EncodedUnder = false, 0 // an encoded cache needs a protobuf type known at compile time
	inf, err := informer.New[client.Object](src, informer.Options[client.Object]{
		Name:       name,
		Memory:     mem,
		Transform:  c.transformFor(),
		Logger:     c.logger,
		Registerer: c.registerer,
	})
	if err != nil {
		return nil, err
	}
	return &typedPart[client.Object]{ns: c.namespace, inf: inf, start: inf.Start}, nil
}

// namespaced reports whether mapping is of a namespaced resource.
func namespaced(m *meta.RESTMapping) bool { return m.Scope.Name() == meta.RESTScopeNameNamespace }
