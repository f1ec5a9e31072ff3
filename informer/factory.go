package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/watcher"
)

// Scope narrows what an informer watches. The zero value is every object
// of the resource in every namespace.
type Scope struct {
	// Namespace limits the informer to one namespace, or to several
	// separated by commas ("a,b"): then the informer runs one list and
	// watch per namespace, for a program that may list only those (a Role
	// in each), and keeps them in one cache, whose reads and handlers see
	// every namespace of the set. A namespace that cannot be listed (403,
	// say) is left out and named in LastError while the others are served;
	// it comes in once it can be listed. "" means all namespaces.
	Namespace string
	// LabelSelector and FieldSelector are sent to the API server as is
	// (see metav1.ListOptions).
	LabelSelector string
	FieldSelector string
}

func (s Scope) String() string {
	var parts []string
	if s.Namespace != "" {
		parts = append(parts, "namespace="+s.Namespace)
	}
	if s.LabelSelector != "" {
		parts = append(parts, fmt.Sprintf("labels=%q", s.LabelSelector))
	}
	if s.FieldSelector != "" {
		parts = append(parts, fmt.Sprintf("fields=%q", s.FieldSelector))
	}
	if len(parts) == 0 {
		return "all namespaces"
	}
	return strings.Join(parts, ", ")
}

// FactoryOptions configures a Factory. The zero value works.
type FactoryOptions struct {
	// Scheme maps Go types to API kinds for Of and OfResource.
	// Default: client-go's scheme of the built-in types. Add your CRD types
	// to a scheme of your own (with the built-ins if you need both).
	Scheme *runtime.Scheme
	// Watch is the template of every informer's reflector configuration;
	// Name, Logger and Registerer are filled in per informer.
	Watch watcher.Options
	// Memory chooses how lean every informer's cached objects are (see
	// Memory). The zero value is leanest.
	Memory Memory
	// Restrict, if set, is called once for each informer the factory
	// creates, with its resource (such as "deployments.v1.apps", see
	// kindgate.ResourceName) and Scope, and may narrow it to a part of its objects
	// (a Restriction: the sharding package's Member.Shard makes them);
	// nil leaves the informer whole. Default: every informer is whole.
	Restrict func(resource string, scope Scope) *Restriction
	// WaitFor, if set, is called once for each informer the factory
	// creates, with its resource as Restrict gets it; a gate it returns
	// holds the informer while the gate's kind is not served (an empty,
	// synced cache; no list or watch). Package kloop sets it for
	// Options.WaitForKinds. Default: no informer waits.
	WaitFor func(resource string) KindGate
	// Logger and Registerer are passed to every informer. Defaults:
	// slog.Default() and the kloop metrics registry.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Factory shares informers: it holds one informer per resource, Go type and
// Scope, so that every part of a program that asks for the same thing gets
// the same informer and the same cache. Start runs them all, including those
// asked for while it runs.
type Factory struct {
	cfg  *rest.Config
	opts FactoryOptions

	mu       sync.Mutex
	entries  map[factoryKey]*factoryEntry
	order    []*factoryEntry
	state    runState
	runCtx   context.Context
	wg       sync.WaitGroup
	runErrs  []error
	dyn      dynamic.Interface
	metaData metadata.Interface
}

type factoryKey struct {
	typ      reflect.Type
	resource string
	scope    Scope
}

type factoryEntry struct {
	name     string
	resource string
	scope    Scope
	informer any // *Informer[T] for the T of the key
	run      func(context.Context) error
	wait     func(context.Context) error
	status   func() Status
}

// NewFactory returns a factory whose informers talk to the API server at
// cfg. It starts nothing and makes no request. Unless cfg has a Dial or
// Transport of its own, the informers share one connection of their own,
// whose HTTP/2 streams buffer at most 256 KiB each (client-go's default is
// 4 MiB): an initial list arrives faster than it is decoded, and the
// smaller window takes that buffer off the first sync's peak memory.
func NewFactory(cfg *rest.Config, opts FactoryOptions) *Factory {
	if opts.Scheme == nil {
		opts.Scheme = clientgoscheme.Scheme
	}
	return &Factory{cfg: watchConfig(cfg), opts: opts, entries: make(map[factoryKey]*factoryEntry)}
}

// Of returns the factory's informer for the built-in (or scheme-registered)
// type T in scope, creating it on first use. The resource is T's kind in
// lower case and plural (ConfigMap → configmaps), which holds for the
// built-in types; use OfResource for a resource whose plural is irregular.
//
//	configMaps, err := informer.Of[*corev1.ConfigMap](factory, informer.Scope{Namespace: "web"})
func Of[T interface {
	*E
	watcher.Object
}, E any](f *Factory, scope Scope) (*Informer[T], error) {
	kinds, _, err := f.opts.Scheme.ObjectKinds(T(new(E)))
	if err != nil {
		return nil, fmt.Errorf("informer.Of[%T]: %w", T(nil), err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(kinds[0])
	return OfResource[T](f, gvr, scope)
}

// OfResource returns the factory's informer for resource gvr, decoded into
// T, in scope. T is one of:
//
//   - a type f's scheme registers for gvr's group and version: the way to
//     CRD types;
//
//   - *metav1.PartialObjectMetadata: a metadata-only informer, which caches
//     names, labels, annotations, owners and resourceVersions and none of
//     the objects' bodies: the cheap way to watch large or numerous objects;
//
//   - *unstructured.Unstructured: for resources whose Go types the program
//     does not have.
//
//     foos, err := informer.OfResource[*v1alpha1.Foo](factory, v1alpha1.SchemeGroupVersion.WithResource("foos"), informer.Scope{})
//     pods, err := informer.OfResource[*metav1.PartialObjectMetadata](factory, corev1.SchemeGroupVersion.WithResource("pods"), informer.Scope{})
func OfResource[T interface {
	*E
	watcher.Object
}, E any](f *Factory, gvr schema.GroupVersionResource, scope Scope) (*Informer[T], error) {
	switch any(T(nil)).(type) {
	case *metav1.PartialObjectMetadata:
		return ofListerWatcher(f, kindgate.ResourceName(gvr)+" (metadata)", scope, func(o watcher.Scope) (watcher.ListerWatcher[T], error) {
			c, err := f.metadataClient()
			if err != nil {
				return nil, err
			}
			var rc metadata.ResourceInterface = c.Resource(gvr)
			if o.Namespace != "" {
				rc = c.Resource(gvr).Namespace(o.Namespace)
			}
			o.Namespace = "" // the client's
			return any(watcher.FromClient[*metav1.PartialObjectMetadata](rc, o)).(watcher.ListerWatcher[T]), nil
		})
	case *unstructured.Unstructured:
		return ofListerWatcher(f, kindgate.ResourceName(gvr)+" (unstructured)", scope, func(o watcher.Scope) (watcher.ListerWatcher[T], error) {
			c, err := f.dynamicClient()
			if err != nil {
				return nil, err
			}
			var rc dynamic.ResourceInterface = c.Resource(gvr)
			if o.Namespace != "" {
				rc = c.Resource(gvr).Namespace(o.Namespace)
			}
			o.Namespace = "" // the client's
			return any(watcher.FromClient[*unstructured.Unstructured](rc, o)).(watcher.ListerWatcher[T]), nil
		})
	}
	return ofListerWatcher(f, kindgate.ResourceName(gvr), scope, func(o watcher.Scope) (watcher.ListerWatcher[T], error) {
		if f.cfg == nil {
			return nil, errors.New("informer: factory has no rest.Config")
		}
		// The informer strips managedFields and shares label sets
		// unless told not to; doing both while decoding saves allocating
		// them at all.
		o.Decoding = watcher.Decoding{
			DropManagedFields: !f.opts.Memory.KeepManagedFields,
			ShareLabels:       !f.opts.Memory.Unshared,
		}
		return watcher.FromResource[T](preferProtobuf[T](f.cfg), f.opts.Scheme, gvr, o)
	})
}

// preferProtobuf returns cfg set to ask for protobuf, with JSON as the
// fallback, when T has a protobuf encoding (the built-in types do, custom
// resources do not) and cfg does not choose a content type itself. That is
// what client-go's generated clients do: protobuf decodes several times
// faster than JSON and allocates less. For other types, with client-go's
// ClientsAllowCBOR feature gate on, cfg is set to accept CBOR before JSON.
func preferProtobuf[T watcher.Object](cfg *rest.Config) *rest.Config {
	var zero T
	_, ok := any(zero).(interface {
		Reset()
		Marshal() ([]byte, error)
		Unmarshal([]byte) error
	})
	if cfg.ContentType != "" || cfg.AcceptContentTypes != "" {
		return cfg
	}
	if !ok {
		if !clientfeatures.FeatureGates().Enabled(clientfeatures.ClientsAllowCBOR) {
			return cfg
		}
		// A custom resource: CBOR where the server serves it (its
		// CBORServingAndStorage gate), JSON where it does not, as
		// client-go's dynamic client asks under the same gate.
		c := rest.CopyConfig(cfg)
		c.AcceptContentTypes = "application/json;q=0.9,application/cbor;q=1"
		return c
	}
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// ofListerWatcher returns the factory's informer for (T, resource, scope),
// creating it with newLW on first use. resource names what is watched (it
// is part of the sharing key and of the informer's name). newLW gets the
// scope as watcher.Scope.
func ofListerWatcher[T watcher.Object](f *Factory, resource string, scope Scope, newLW func(watcher.Scope) (watcher.ListerWatcher[T], error)) (*Informer[T], error) {
	namespaces, err := splitNamespaces(scope.Namespace)
	if err != nil {
		return nil, fmt.Errorf("informer %s: %w", resource, err)
	}
	scope.Namespace = strings.Join(namespaces, ",")
	key := factoryKey{typ: reflect.TypeFor[T](), resource: resource, scope: scope}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.entries[key]; ok {
		return e.informer.(*Informer[T]), nil
	}
	if f.state == stateStopped {
		return nil, fmt.Errorf("informer factory: %w", ErrStopped)
	}
	name := resource + " [" + scope.String() + "]"
	wcfg := f.opts.Watch
	wcfg.Name = name
	wcfg.Logger, wcfg.Registerer = f.opts.Logger, f.opts.Registerer
	iopts := Options[T]{
		Name:       name,
		Memory:     f.opts.Memory,
		Logger:     f.opts.Logger,
		Registerer: f.opts.Registerer,
	}
	var r *Restriction
	if f.opts.Restrict != nil {
		r = f.opts.Restrict(resource, scope)
	}
	if r != nil {
		wcfg.ListOptions = r.ListOptions
		keep := r.Keep
		iopts.Filter = func(obj T) bool { return keep(obj) }
	}
	var gate KindGate
	if f.opts.WaitFor != nil {
		gate = f.opts.WaitFor(resource)
	}
	// One reflector per namespace: a program granted a few namespaces
	// (a Role in each) may not list across all of them.
	srcs := make([]Source[T], len(namespaces))
	for i, ns := range namespaces {
		one := scope
		one.Namespace = ns
		lw, err := newLW(watcher.Scope{Namespace: ns, LabelSelector: scope.LabelSelector, FieldSelector: scope.FieldSelector})
		if err != nil {
			return nil, fmt.Errorf("informer %s: %w", name, err)
		}
		if gate != nil {
			lw = kindgate.Guard(lw, gate)
		}
		cfg := wcfg
		if len(namespaces) > 1 {
			cfg.Name = resource + " [" + one.String() + "]"
		}
		srcs[i] = watcher.NewReflector(lw, cfg)
	}
	var src Source[T] = srcs[0]
	if len(srcs) > 1 {
		logger := f.opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		src = newNamespacesSource(name, namespaces, srcs, logger)
	}
	if gate != nil {
		src = kindgate.Gated(src, gate)
	}
	inf, err := New(src, iopts)
	if err != nil {
		return nil, err
	}
	if r != nil && r.Attach != nil {
		r.Attach(restricted[T]{inf})
	}
	e := &factoryEntry{name: name, resource: resource, scope: scope, informer: inf, run: inf.Start, wait: inf.WaitForSync, status: inf.Status}
	f.entries[key] = e
	f.order = append(f.order, e)
	if f.state == stateRunning {
		f.startLocked(e)
	}
	return inf, nil
}

func (f *Factory) metadataClient() (metadata.Interface, error) {
	if f.cfg == nil {
		return nil, errors.New("informer: factory has no rest.Config")
	}
	if f.metaData == nil {
		c, err := metadata.NewForConfig(f.cfg)
		if err != nil {
			return nil, err
		}
		f.metaData = c
	}
	return f.metaData, nil
}

func (f *Factory) dynamicClient() (dynamic.Interface, error) {
	if f.cfg == nil {
		return nil, errors.New("informer: factory has no rest.Config")
	}
	if f.dyn == nil {
		c, err := dynamic.NewForConfig(f.cfg)
		if err != nil {
			return nil, err
		}
		f.dyn = c
	}
	return f.dyn, nil
}

// Start runs every informer of the factory, and every one asked for while
// it runs, until ctx is done. It returns when all of them have exited:
// nil, or the errors of informers that could not run. It returns
// ErrAlreadyStarted if called twice.
func (f *Factory) Start(ctx context.Context) error {
	f.mu.Lock()
	if f.state != stateNew {
		f.mu.Unlock()
		return fmt.Errorf("informer factory: %w", ErrAlreadyStarted)
	}
	f.state, f.runCtx = stateRunning, ctx
	for _, e := range f.order {
		f.startLocked(e)
	}
	f.mu.Unlock()

	<-ctx.Done()

	f.mu.Lock()
	f.state, f.runCtx = stateStopped, nil
	f.mu.Unlock()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.runErrs...)
}

func (f *Factory) startLocked(e *factoryEntry) {
	ctx := f.runCtx
	f.wg.Go(func() {
		if err := e.run(ctx); err != nil {
			f.mu.Lock()
			f.runErrs = append(f.runErrs, err)
			f.mu.Unlock()
		}
	})
}

// WaitForSync waits until every informer the factory holds has synced, or
// ctx is done. Then it returns an error that wraps one *SyncError per
// informer that had not synced, each naming the informer and its last
// list/watch error: errors.As(err, &syncErr) finds the first, and
// apierrors.IsForbidden(err) is true if any informer was refused.
func (f *Factory) WaitForSync(ctx context.Context) error {
	f.mu.Lock()
	entries := append([]*factoryEntry(nil), f.order...)
	f.mu.Unlock()
	var errs []error
	for _, e := range entries {
		if err := e.wait(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d informers did not sync:\n%w", len(errs), len(entries), errors.Join(errs...))
}
