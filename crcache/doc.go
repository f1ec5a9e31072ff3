// Package crcache puts kloop's informers under an unchanged
// controller-runtime program: a cache.Cache (sigs.k8s.io/controller-runtime/pkg/cache)
// whose informers, store and indexes are kloop's. One line in the
// manager's options does it:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{NewCache: crcache.NewCache})
//
// (cluster.Options.NewCache likewise). NewCacheWith takes kloop's own
// settings, such as informer.Memory.
//
// It is a module of its own, so that controller-runtime stays out of
// kloop's main module.
//
// # What the program gets
//
//   - kloop's cache: one lean copy of each object (managedFields stripped,
//     repeated metadata shared), the common built-in kinds decoded by
//     kloop's own protobuf path, optionally kept encoded
//     (informer.Memory.Encoded), and a smaller HTTP/2 window during the
//     first list, for a lower cold-start peak.
//   - The informers' metrics (kloop_informer_*: objects, cache bytes,
//     queue depths, changes) on controller-runtime's metrics registry,
//     which the manager serves.
//   - Honest sync errors: an informer the API server refuses (403) ends
//     WaitForCacheSync at once (false, with the error logged naming the
//     informer) instead of retrying silently until a deadline; a wait cut
//     short by its context is a Timeout (apierrors.IsTimeout), as in
//     controller-runtime, wrapping kloop's informer.SyncError, which
//     names the informer and its last list/watch error.
//
// # What it honours
//
// Get and List of typed objects, *unstructured.Unstructured and
// *metav1.PartialObjectMetadata (and their lists), each class by an
// informer of its own, as in controller-runtime; List's Namespace,
// LabelSelector, FieldSelector (exact matches on fields indexed with
// IndexField, which is what controller-runtime's cache allows), Limit
// (without a continue token: a cache has no pages; the list's continue
// is controller-runtime's "continue-not-supported"), UnsafeDisableDeepCopy
// on a call or a kind. GetInformer and GetInformerForKind (with
// cache.BlockUntilSynced), RemoveInformer, IndexField, Start,
// WaitForCacheSync. The informer returned takes client-go
// ResourceEventHandlers: OnAdd with isInInitialList, OnUpdate, OnDelete
// with a cache.DeletedFinalStateUnknown for a delete inferred from a
// relist, as client-go delivers them; HasSynced and HasSyncedChecker of the
// informer and of each registration, RemoveEventHandler, AddIndexers,
// IsStopped. cache.Options: Scheme, Mapper, DefaultNamespaces (with
// AllNamespaces), ByObject (namespaces, label and field selectors,
// transforms, UnsafeDisableDeepCopy, SyncPeriod), DefaultLabelSelector,
// DefaultFieldSelector, DefaultTransform, DefaultUnsafeDisableDeepCopy,
// ReaderFailOnMissingInformer, SyncPeriod, with controller-runtime's
// precedence (ByObject, then DefaultNamespaces[namespace], then the
// Default* fields). SyncPeriod is kloop's replay interval
// (informer.HandlerOptions.ReplayInterval): every cached object again as an
// update with the same old and new object, to each handler, spread over
// ±10% of the period as controller-runtime spreads it; it never relists.
//
// # What is different
//
//   - Reads are deep copies unless UnsafeDisableDeepCopy, as in
//     controller-runtime. With it, the objects are the cache's own and
//     read-only, shared with every other reader and handler: a program
//     that changes one corrupts the cache for everyone (kloop's mutation
//     detector fails tests that do). Objects handed to event handlers are
//     the cache's too, as in client-go.
//   - managedFields are not cached (informer.Memory.KeepManagedFields keeps
//     them).
//   - A transform (ByObject.Transform, DefaultTransform) that fails, or
//     returns something that is not an object, leaves the object
//     untransformed and is logged; client-go drops such a watch event,
//     or fails (and retries) the whole list.
//   - Options.HTTPClient is not used by the informers of the built-in
//     kinds: kloop's informers dial a connection of their own from the
//     rest.Config, with the smaller HTTP/2 window.
//
// # What it refuses
//
// New fails, naming them, on the options it cannot honour:
// Options.NewInformer (the informers are kloop's, not client-go
// SharedIndexInformers), DefaultWatchErrorHandler (kloop's informers
// retry with backoff on their own and report their last error through
// WaitForCacheSync), and EnableWatchBookmarks=false anywhere (kloop's
// watches always ask for bookmarks).
//
// Reads after writes do not change: the manager's client reads through
// this cache as it read through controller-runtime's, so a read right after
// a write may not see it yet, with either.
package crcache
