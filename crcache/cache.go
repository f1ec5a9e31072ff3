package crcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kloop-dev/kloop/informer"
)

// Options are kloop's own settings for the cache, beyond controller-runtime's
// cache.Options. The zero value works.
type Options struct {
	// Memory chooses how lean the cached objects are (see informer.Memory):
	// by default managedFields are stripped and repeated metadata is
	// shared; Memory.Encoded keeps the built-in kinds as their protobuf
	// encoding.
	Memory informer.Memory
	// Logger receives the informers' logs. Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the informers' metrics (kloop_informer_*).
	// Default: controller-runtime's metrics registry, which the manager
	// serves on its metrics endpoint.
	Registerer prometheus.Registerer
}

// NewCache is a controller-runtime cache.NewCacheFunc: set it as
// manager.Options.NewCache (or cluster.Options.NewCache) to run an
// unchanged controller-runtime program on kloop's informers.
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{NewCache: crcache.NewCache})
func NewCache(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	return New(cfg, opts, Options{})
}

// NewCacheWith is NewCache with kloop's own options, for instance a memory
// setting:
//
//	ctrl.Options{NewCache: crcache.NewCacheWith(crcache.Options{Memory: informer.Memory{Encoded: true}})}
func NewCacheWith(o Options) crcache.NewCacheFunc {
	return func(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) { return New(cfg, opts, o) }
}

// New returns a cache for cfg. It fails on an option of opts it cannot
// honour (see the package documentation); it starts nothing.
func New(cfg *rest.Config, opts crcache.Options, o Options) (*Cache, error) {
	if err := unsupported(opts); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if opts.HTTPClient == nil {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("crcache: HTTP client: %w", err)
		}
		opts.HTTPClient = hc
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	if opts.Mapper == nil {
		m, err := apiutil.NewDynamicRESTMapper(cfg, opts.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("crcache: REST mapper: %w", err)
		}
		opts.Mapper = m
	}
	s, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registerer == nil {
		o.Registerer = crmetrics.Registry
	}
	return &Cache{
		cfg:           cfg,
		httpClient:    opts.HTTPClient,
		scheme:        opts.Scheme,
		mapper:        opts.Mapper,
		settings:      s,
		failOnMissing: opts.ReaderFailOnMissingInformer,
		o:             o,
		entries:       make(map[entryKey]*entry),
		startedCh:     make(chan struct{}),
	}, nil
}

// Cache is a controller-runtime cache.Cache on kloop's informers. See the
// package documentation.
type Cache struct {
	cfg           *rest.Config
	httpClient    *http.Client
	scheme        *runtime.Scheme
	mapper        meta.RESTMapper
	settings      settings
	failOnMissing bool
	o             Options

	mu        sync.Mutex
	entries   map[entryKey]*entry
	started   bool
	stopped   bool
	runCtx    context.Context
	startedCh chan struct{}
	wg        sync.WaitGroup
}

var _ crcache.Cache = (*Cache)(nil)

// objectClass is how a kind is cached: decoded into its Go type, as
// unstructured objects, or as metadata only. A kind may be cached in all
// three ways at once, by three informers, as in controller-runtime.
type objectClass uint8

const (
	classTyped objectClass = iota
	classUnstructured
	classMetadata
)

func classOf(obj runtime.Object) objectClass {
	switch obj.(type) {
	case runtime.Unstructured:
		return classUnstructured
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return classMetadata
	}
	return classTyped
}

type entryKey struct {
	gvk   schema.GroupVersionKind
	class objectClass
}

// entry is the informer of one kind and class: one part per namespace.
type entry struct {
	key        entryKey
	namespaced bool
	parts      []*partEntry // by namespace, "" (all) first
	inf        *sharedInformer

	// Lifecycle, under Cache.mu.
	removed bool
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the parts have stopped, or on removal before start
}

type partEntry struct {
	part
	noCopy bool          // UnsafeDisableDeepCopy
	resync time.Duration // the default replay interval of its handlers
}

// Start runs every informer of the cache, and every one asked for while
// it runs, until ctx is done; it returns once they have all stopped.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("crcache: the cache was already started")
	}
	c.started, c.runCtx = true, ctx
	for _, e := range c.entries {
		c.startLocked(e)
	}
	close(c.startedCh)
	c.mu.Unlock()

	<-ctx.Done()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

func (c *Cache) startLocked(e *entry) {
	if e.removed || c.stopped {
		return
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	e.cancel = cancel
	var parts sync.WaitGroup
	for _, p := range e.parts {
		parts.Go(func() {
			if err := p.run(ctx); err != nil && ctx.Err() == nil {
				c.o.Logger.Error("informer stopped", "informer", p.name(), "err", err)
			}
		})
	}
	c.wg.Go(func() {
		parts.Wait()
		cancel()
		close(e.stopped)
	})
}

// NeedLeaderElection is false: a cache runs on every replica.
func (c *Cache) NeedLeaderElection() bool { return false }

// WaitForCacheSync waits until the cache has been started and every
// informer it holds has synced, or ctx is done. An informer the API server
// refuses (403) ends the wait at once with false: its error is logged,
// naming the informer.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.startedCh:
	case <-ctx.Done():
		return false
	}
	c.mu.Lock()
	entries := slices.Collect(maps.Values(c.entries))
	c.mu.Unlock()
	for _, e := range entries {
		if err := e.waitForSync(ctx); err != nil {
			c.o.Logger.Error("cache did not sync", "err", err)
			return false
		}
	}
	return true
}

// waitForSync waits for every part of e to sync. When ctx ends first, the
// error is also a Timeout (apierrors.IsTimeout), as controller-runtime's
// cache reports it, besides kloop's SyncError, which names the informer
// and its last list/watch error. An informer the API server refuses ends
// the wait at once with the SyncError alone.
func (e *entry) waitForSync(ctx context.Context) error {
	for _, p := range e.parts {
		err := p.waitForSync(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil && !errors.Is(err, informer.ErrRefused) {
			return errors.Join(apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for the %s informer to sync", e.key.gvk), 0), err)
		}
		return fmt.Errorf("crcache: %s: %w", e.key.gvk, err)
	}
	return nil
}

// GetInformer returns the informer for obj's kind, creating it on first use
// (and starting it if the cache runs). Unless told not to
// (cache.BlockUntilSynced(false)) it waits for a running informer to sync.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	return c.informerFor(ctx, entryKey{gvk, classOf(obj)}, opts)
}

// GetInformerForKind is GetInformer for the typed objects of gvk.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	if _, err := c.scheme.New(gvk); err != nil {
		return nil, err
	}
	return c.informerFor(ctx, entryKey{gvk, classTyped}, opts)
}

func (c *Cache) informerFor(ctx context.Context, key entryKey, opts []crcache.InformerGetOption) (crcache.Informer, error) {
	var o crcache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	e, started, err := c.entryFor(key, false)
	if err != nil {
		return nil, err
	}
	if started && (o.BlockUntilSynced == nil || *o.BlockUntilSynced) {
		if err := e.waitForSync(ctx); err != nil {
			return nil, err
		}
	}
	return e.inf, nil
}

// RemoveInformer stops the informer of obj's kind, if there is one, and
// forgets it: its handlers hear no more, and the next read makes a new one.
func (c *Cache) RemoveInformer(_ context.Context, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return err
	}
	key := entryKey{gvk, classOf(obj)}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	delete(c.entries, key)
	e.removed = true
	if e.cancel != nil {
		e.cancel()
	} else {
		close(e.stopped)
	}
	return nil
}

// IndexField adds a field index to obj's kind, for List with a field
// selector (client.MatchingFields): extract gives the values of field for
// an object.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	inf, err := c.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return inf.(*sharedInformer).addIndex(fieldIndexName(field), func(o client.Object) []string {
		vals := extract(o)
		ns := o.GetNamespace()
		out := make([]string, 0, 2*len(vals))
		for _, v := range vals {
			out = append(out, namespacedKey("", v))
			if ns != "" {
				out = append(out, namespacedKey(ns, v))
			}
		}
		return out
	})
}

// fieldIndexName and namespacedKey spell field indexes as
// controller-runtime does, so that an index added through the informer's
// AddIndexers by a program that knows that spelling serves List too.
func fieldIndexName(field string) string { return "field:" + field }

func namespacedKey(ns, v string) string {
	if ns == "" {
		ns = "__all_namespaces"
	}
	return ns + "/" + v
}

// entryFor returns the entry for key, making it on first use unless
// failOnMissing, and whether the cache has started.
func (c *Cache) entryFor(key entryKey, failOnMissing bool) (*entry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e, c.started, nil
	}
	if failOnMissing {
		return nil, c.started, &crcache.ErrResourceNotCached{GVK: key.gvk}
	}
	e, err := c.newEntry(key)
	if err != nil {
		return nil, c.started, err
	}
	c.entries[key] = e
	if c.started {
		c.startLocked(e)
	}
	return e, c.started, nil
}

func (c *Cache) newEntry(key entryKey) (*entry, error) {
	mapping, err := c.mapper.RESTMapping(key.gvk.GroupKind(), key.gvk.Version)
	if err != nil {
		return nil, err
	}
	e := &entry{key: key, namespaced: namespaced(mapping), stopped: make(chan struct{})}
	configs := c.settings.configsFor(key.gvk, e.namespaced)
	for _, ns := range slices.Sorted(maps.Keys(configs)) {
		cfg := configs[ns]
		pc := partConfig{
			gvk:        key.gvk,
			gvr:        mapping.Resource,
			class:      key.class,
			namespace:  ns,
			memory:     c.o.Memory,
			scheme:     c.scheme,
			restConfig: c.cfg,
			httpClient: c.httpClient,
			logger:     c.o.Logger,
			registerer: c.o.Registerer,
		}
		if !e.namespaced {
			pc.namespace = ""
		}
		if cfg.LabelSelector != nil && !cfg.LabelSelector.Empty() {
			pc.label = cfg.LabelSelector.String()
		}
		if cfg.FieldSelector != nil && !cfg.FieldSelector.Empty() {
			pc.field = cfg.FieldSelector.String()
		}
		if cfg.Transform != nil {
			pc.transform = userTransform(cfg.Transform, c.o.Logger)
		}
		p, err := newPart(pc)
		if err != nil {
			return nil, fmt.Errorf("crcache: informer for %s: %w", key.gvk, err)
		}
		period := defaultSyncPeriod
		if cfg.SyncPeriod != nil {
			period = *cfg.SyncPeriod
		}
		e.parts = append(e.parts, &partEntry{
			part:   p,
			noCopy: cfg.UnsafeDisableDeepCopy != nil && *cfg.UnsafeDisableDeepCopy,
			// controller-runtime spreads replays over ±10% of the period,
			// so that informers do not replay at the same moment.
			resync: time.Duration(float64(period) * (0.9 + rand.Float64()/5)),
		})
	}
	e.inf = &sharedInformer{c: c, e: e}
	return e, nil
}

// userTransform adapts a client-go transform. One that fails or returns
// something that is not an object leaves the object as it was, and says so
// in the log.
func userTransform(fn toolscache.TransformFunc, logger *slog.Logger) func(client.Object) client.Object {
	return func(obj client.Object) client.Object {
		out, err := fn(obj)
		if err != nil {
			logger.Error("transform failed; the object is cached untransformed", "namespace", obj.GetNamespace(), "name", obj.GetName(), "err", err)
			return obj
		}
		o, ok := out.(client.Object)
		if !ok {
			logger.Error("transform returned no object; the object is cached untransformed", "namespace", obj.GetNamespace(), "name", obj.GetName(), "got", fmt.Sprintf("%T", out))
			return obj
		}
		return o
	}
}

// partFor returns the part that holds namespace ns: its own, or the one
// of all namespaces.
func (e *entry) partFor(ns string) (*partEntry, bool) {
	if !e.namespaced {
		return e.parts[0], true
	}
	var all *partEntry
	for _, p := range e.parts {
		switch p.namespace() {
		case ns:
			return p, true
		case "":
			all = p
		}
	}
	return all, all != nil
}
