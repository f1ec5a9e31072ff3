package crcache

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// defaultSyncPeriod is controller-runtime's default SyncPeriod: the
// interval at which handlers get every cached object again.
const defaultSyncPeriod = 10 * time.Hour

// settings is cache.Options resolved into what each kind's informer is
// made from, following controller-runtime's precedence: ByObject, then
// DefaultNamespaces[namespace], then the Default* fields.
type settings struct {
	global            crcache.Config
	defaultNamespaces map[string]crcache.Config // defaulted; nil: all namespaces
	byObject          map[schema.GroupVersionKind]objectSettings
}

type objectSettings struct {
	// namespaces, when not empty, are the namespaces the kind is cached
	// in, each with its own defaulted configuration.
	namespaces map[string]crcache.Config
	// all is the configuration when namespaces is empty: every namespace,
	// or a cluster-scoped kind.
	all crcache.Config
}

// unsupported names the options of cache.Options this cache cannot honour.
func unsupported(opts crcache.Options) error {
	var errs []error
	if opts.NewInformer != nil {
		errs = append(errs, errors.New("Options.NewInformer: the informers are kloop's, not client-go SharedIndexInformers"))
	}
	if opts.DefaultWatchErrorHandler != nil {
		errs = append(errs, errors.New("Options.DefaultWatchErrorHandler: kloop's informers retry with backoff on their own and report their last error through WaitForCacheSync and the informer's status; there is no handler to call"))
	}
	bookmarksOff := func(b *bool) bool { return b != nil && !*b }
	if bookmarksOff(opts.DefaultEnableWatchBookmarks) {
		errs = append(errs, errors.New("Options.DefaultEnableWatchBookmarks=false: kloop's watches always ask for bookmarks"))
	}
	for ns, c := range opts.DefaultNamespaces {
		if bookmarksOff(c.EnableWatchBookmarks) {
			errs = append(errs, fmt.Errorf("Options.DefaultNamespaces[%q].EnableWatchBookmarks=false: kloop's watches always ask for bookmarks", ns))
		}
	}
	for obj, bo := range opts.ByObject {
		if bookmarksOff(bo.EnableWatchBookmarks) {
			errs = append(errs, fmt.Errorf("Options.ByObject[%T].EnableWatchBookmarks=false: kloop's watches always ask for bookmarks", obj))
		}
		for ns, c := range bo.Namespaces {
			if bookmarksOff(c.EnableWatchBookmarks) {
				errs = append(errs, fmt.Errorf("Options.ByObject[%T].Namespaces[%q].EnableWatchBookmarks=false: kloop's watches always ask for bookmarks", obj, ns))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("crcache: options it cannot honour: %w", errors.Join(errs...))
}

// resolve turns opts into settings. opts.Scheme and opts.Mapper are set.
func resolve(opts crcache.Options) (settings, error) {
	s := settings{
		global: crcache.Config{
			LabelSelector:         opts.DefaultLabelSelector,
			FieldSelector:         opts.DefaultFieldSelector,
			Transform:             opts.DefaultTransform,
			UnsafeDisableDeepCopy: opts.DefaultUnsafeDisableDeepCopy,
			SyncPeriod:            opts.SyncPeriod,
		},
		byObject: make(map[schema.GroupVersionKind]objectSettings, len(opts.ByObject)),
	}
	for obj, bo := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return settings{}, fmt.Errorf("crcache: ByObject[%T]: %w", obj, err)
		}
		isNamespaced, err := apiutil.IsObjectNamespaced(obj, opts.Scheme, opts.Mapper)
		if err != nil {
			return settings{}, fmt.Errorf("crcache: ByObject[%T]: is it namespaced? %w", obj, err)
		}
		if !isNamespaced && bo.Namespaces != nil {
			return settings{}, fmt.Errorf("crcache: ByObject[%T]: the kind is cluster-scoped, but Namespaces is set", obj)
		}
		typeLevel := crcache.Config{
			LabelSelector:         bo.Label,
			FieldSelector:         bo.Field,
			Transform:             bo.Transform,
			UnsafeDisableDeepCopy: bo.UnsafeDisableDeepCopy,
			SyncPeriod:            bo.SyncPeriod,
		}
		namespaces := bo.Namespaces
		if isNamespaced && namespaces == nil {
			// Undefaulted: a namespace's own settings fall through to the
			// type's before DefaultNamespaces'.
			namespaces = opts.DefaultNamespaces
		}
		os := objectSettings{}
		if isNamespaced && len(namespaces) > 0 {
			os.namespaces = make(map[string]crcache.Config, len(namespaces))
			for ns, c := range namespaces {
				c = inherit(c, typeLevel)
				if d, ok := opts.DefaultNamespaces[ns]; ok {
					c = inherit(c, d)
				}
				os.namespaces[ns] = inherit(c, s.global)
			}
			excludeOthers(os.namespaces)
		} else {
			os.all = inherit(typeLevel, s.global)
		}
		s.byObject[gvk] = os
	}
	if len(opts.DefaultNamespaces) > 0 {
		s.defaultNamespaces = make(map[string]crcache.Config, len(opts.DefaultNamespaces))
		for ns, c := range opts.DefaultNamespaces {
			s.defaultNamespaces[ns] = inherit(c, s.global)
		}
		excludeOthers(s.defaultNamespaces)
	}
	return s, nil
}

// configsFor returns the configuration of each namespace a kind is cached
// in ("" for all namespaces, or a cluster-scoped kind).
func (s settings) configsFor(gvk schema.GroupVersionKind, isNamespaced bool) map[string]crcache.Config {
	if os, ok := s.byObject[gvk]; ok {
		if isNamespaced && len(os.namespaces) > 0 {
			return os.namespaces
		}
		return map[string]crcache.Config{"": os.all}
	}
	if isNamespaced && len(s.defaultNamespaces) > 0 {
		return s.defaultNamespaces
	}
	return map[string]crcache.Config{"": s.global}
}

// inherit fills what c leaves unset from from.
func inherit(c, from crcache.Config) crcache.Config {
	if c.LabelSelector == nil {
		c.LabelSelector = from.LabelSelector
	}
	if c.FieldSelector == nil {
		c.FieldSelector = from.FieldSelector
	}
	if c.Transform == nil {
		c.Transform = from.Transform
	}
	if c.UnsafeDisableDeepCopy == nil {
		c.UnsafeDisableDeepCopy = from.UnsafeDisableDeepCopy
	}
	if c.EnableWatchBookmarks == nil {
		c.EnableWatchBookmarks = from.EnableWatchBookmarks
	}
	if c.SyncPeriod == nil {
		c.SyncPeriod = from.SyncPeriod
	}
	return c
}

// excludeOthers narrows the all-namespaces entry of configs, if there is
// one, to the namespaces that have no entry of their own, so that no
// object is cached twice.
func excludeOthers(configs map[string]crcache.Config) {
	all, ok := configs[metav1.NamespaceAll]
	if !ok {
		return
	}
	var sels []fields.Selector
	for _, ns := range slices.Sorted(maps.Keys(configs)) {
		if ns != metav1.NamespaceAll {
			sels = append(sels, fields.OneTermNotEqualSelector("metadata.namespace", ns))
		}
	}
	if all.FieldSelector != nil {
		sels = append(sels, all.FieldSelector)
	}
	all.FieldSelector = fields.AndSelectors(sels...)
	configs[metav1.NamespaceAll] = all
}
