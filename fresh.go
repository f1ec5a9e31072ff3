package kloop

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/rvorder"
)

// CatchUp returns once the handle's cache is at least as fresh as
// resourceVersion rv in namespace ("" for all the handle watches): it
// holds every object there at the state the API server had at rv or later,
// and none that was deleted by then. The resourceVersions of one cluster
// are comparable (Kubernetes 1.35), so rv may be any object's, of any
// kind. An rv of "" stands for the newest
// object change among the causes of the reconcile ctx belongs to
// (controller.CausesFrom): in a reconcile, CatchUp(ctx, namespace, "")
// before a read of a kind other than the one that changed sees everything
// that happened before that change, such as a Deployment created just
// before the ConfigMap it mounts was edited, which that kind's informer
// may not have delivered yet.
//
// A cache already at rv or later costs one comparison. A cache behind rv
// may be lagging or only quiet (an informer's resourceVersion moves with
// its own kind's events, and with the API server's bookmarks about once a
// minute), so CatchUp asks the API server for the scope's metadata as of
// rv or later (one list of the namespace's names and resourceVersions, no
// bodies, with the handle's selectors) and
// waits until the cache holds each listed object at its listed
// resourceVersion and none of those the list no longer has. A quiet cache
// passes at once; a lagging one, as soon as its informer has delivered
// what it lags by. The wait is bounded by ctx and by the client's
// DefaultMaxWait, after which it fails naming what the cache had not seen.
//
// An App that shards caches only its share, which the list cannot tell:
// CatchUp then returns an error.
func (h *Handle[T]) CatchUp(ctx context.Context, namespace, rv string) error {
	if err := h.readable(ctx); err != nil {
		return err
	}
	if rv == "" {
		rv = latestChange(ctx)
	}
	if rv == "" {
		return nil // no object's change woke it
	}
	lister := h.inf.Lister()
	if rvorder.AtOrAfter(lister.ResourceVersion(), rv) {
		return nil
	}
	if h.namespaced && namespace != "" && h.scope.Namespace != "" && !slices.Contains(strings.Split(h.scope.Namespace, ","), namespace) {
		return nil // the handle holds nothing there
	}
	if h.app.member != nil {
		return fmt.Errorf("kloop: CatchUp on %s: the App shards, and its cache holds only this replica's share, which a list of the scope cannot tell", h.gvk.Kind)
	}
	listed, listRV, err := h.listMeta(ctx, namespace)
	if err != nil {
		return fmt.Errorf("kloop: CatchUp on %s to resourceVersion %s: %w", h.gvk.Kind, rv, err)
	}
	ctx, cancel := context.WithTimeout(ctx, client.DefaultMaxWait)
	defer cancel()
	for _, m := range listed {
		if err := lister.WaitFor(ctx, cache.Key{Namespace: m.Namespace, Name: m.Name}, m.ResourceVersion); err != nil {
			return fmt.Errorf("kloop: CatchUp on %s to resourceVersion %s: %w", h.gvk.Kind, rv, err)
		}
	}
	// What the cache holds that the list has not was deleted (or left the
	// scope) by listRV: wait for that to arrive, or for the cache to pass
	// listRV.
	keep := make(map[cache.Key]bool, len(listed))
	for _, m := range listed {
		keep[cache.Key{Namespace: m.Namespace, Name: m.Name}] = true
	}
	for {
		changed := lister.Changed()
		gone := rvorder.AtOrAfter(lister.ResourceVersion(), listRV)
		var left cache.Key
		if !gone {
			gone = true
			for _, obj := range lister.ListInNamespace(namespace, nil) {
				if k := cache.KeyOf(obj); !keep[k] {
					gone, left = false, k
					break
				}
			}
		}
		if gone {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("kloop: CatchUp on %s to resourceVersion %s: the cache still holds %s, which the API server no longer had at %s: %w",
				h.gvk.Kind, rv, left, listRV, context.Cause(ctx))
		}
	}
}

// listMeta lists the metadata of the handle's objects in namespace ("" for
// all it watches) as the API server has them now: the objects and the
// list's resourceVersion.
func (h *Handle[T]) listMeta(ctx context.Context, namespace string) ([]metav1.PartialObjectMetadata, string, error) {
	mc, err := h.app.metadataClient()
	if err != nil {
		return nil, "", err
	}
	// A consistent list (no resourceVersion) is at rv or later, since
	// rv was issued before it: the API server serves it from its watch
	// cache once that is fresh, where a list "not older than rv" of a
	// quiet resource waits on the cache's own progress.
	opts := metav1.ListOptions{LabelSelector: h.scope.LabelSelector, FieldSelector: h.scope.FieldSelector}
	var (
		out    []metav1.PartialObjectMetadata
		listRV string
	)
	namespaces := strings.Split(h.scope.Namespace, ",")
	if namespace != "" && h.namespaced {
		namespaces = []string{namespace}
	}
	for _, ns := range namespaces {
		l, err := mc.Resource(h.gvr).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		out = append(out, l.Items...)
		if listRV == "" || rvorder.AtOrAfter(l.ResourceVersion, listRV) {
			listRV = l.ResourceVersion
		}
	}
	return out, listRV, nil
}

// metadataClient is the App's metadata client, made on first use.
func (a *App) metadataClient() (metadata.Interface, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.metadata == nil {
		mc, err := metadata.NewForConfig(a.cfg)
		if err != nil {
			return nil, err
		}
		a.metadata = mc
	}
	return a.metadata, nil
}

// latestChange is the resourceVersion of the newest object change among
// the causes of the reconcile ctx belongs to, "" when none is an object's
// change.
func latestChange(ctx context.Context) string {
	latest := ""
	causes, _ := controller.CausesFrom(ctx)
	for _, c := range causes {
		if c.ResourceVersion != "" && (latest == "" || !rvorder.AtOrAfter(latest, c.ResourceVersion)) {
			latest = c.ResourceVersion
		}
	}
	return latest
}
