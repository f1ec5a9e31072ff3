// Package informer keeps caches of Kubernetes objects current and tells
// handlers what changed: client-go's DeltaFIFO, SharedIndexInformer,
// SharedInformerFactory, ResourceEventHandler and WaitForCacheSync, with
// types.
//
// # Parts
//
//   - Informer[T] consumes the event stream of a Source[T] (a
//     watcher.Reflector in practice), applies it to a cache.Store[T] through a
//     delta queue, and fans every change out to its handlers. Lister gives
//     read access to the cache.
//   - Handler[T] receives every change as a cache.Event[T]: its Kind
//     (Added, Updated, Deleted), Old and New typed objects, Replay for state
//     re-delivered rather than changed, and FinalStateUnknown for a delete
//     inferred from a relist, instead of a tombstone of another type.
//     HandlerFuncs[T] splits events into one function per kind.
//   - Factory shares informers: one per Go type, resource and Scope
//     (namespace, label and field selector). Of and OfResource create them
//     on first use.
//
// # Guarantees
//
//   - The cache applies events in stream order per key. When the cache
//     falls behind, pending changes to one key merge into its latest state,
//     so the delta queue holds at most one entry per key; a relist arrives as
//     one snapshot that the cache swaps in at once (readers never see half of
//     it) and that supersedes the changes queued before it.
//   - The cache's resourceVersion never runs ahead of its contents, so
//     Lister().WaitFor(ctx, key, rv) after a write reads your own write.
//   - Each handler has its own queue and goroutine: a slow or stuck handler
//     holds up neither the cache nor any other handler. Its queue merges
//     events per key (an add then updates is one add of the latest state;
//     an add then a delete is nothing), so it stays bounded by the number
//     of keys, and a handler always sees a consistent history: an update's
//     Old is what it saw last, a delete is for an object it was told about.
//     The exception is an inline handler (HandlerOptions.Inline, what
//     controller sources use): the informer calls it as it applies each
//     change, with no queue or goroutine of its own, so it must never
//     block.
//   - No key starves behind a slow handler: a key that changes again while
//     it is queued keeps its place, so a change waits for at most the
//     notifications that were queued ahead of its key when the key entered
//     the handler's queue (at most one per other key), however often that
//     key or others change meanwhile.
//   - A handler is called from one goroutine, one call at a time.
//   - A handler added after the informer synced first gets every cached
//     object as an Added event with Replay set. Registration.Synced closes
//     once the handler has returned from every event of the state it
//     started from.
//   - A panicking handler is recovered, logged with log/slog and counted in
//     kloop_informer_handler_panics_total; the event is dropped and
//     everything else goes on.
//   - Registration.Remove never waits, so it may be called from the handler
//     itself: no callback begins after it returns, and Registration.Done
//     closes once the callback running then has returned.
//   - WaitForSync returns an error, never a bare false: a *SyncError that
//     names the informer and wraps its last list/watch error (so
//     apierrors.IsForbidden and IsNotFound work on it) and the reason the
//     wait ended.
//   - Start returns only when every goroutine it started has exited. No
//     constructor starts a goroutine.
//   - With a Filter (Options.Filter, or a factory's Restrict), only the
//     objects it accepts are cached and notified. When a factory's
//     Restrict moves (a sharding member's share), the informer drops the
//     objects it no longer accepts without telling handlers (they were not
//     deleted) and takes a new snapshot, whose newly accepted objects reach
//     handlers as Added events with Replay set. A snapshot never reports an object the
//     Filter rejects as deleted.
//   - managedFields are stripped before objects are queued or cached
//     (Memory.KeepManagedFields to keep them).
//
// # Not guaranteed
//
//   - Every intermediate state. Merging means a handler may see fewer
//     updates than the API server made; it always sees the latest state.
//   - Order across keys for a handler that falls behind: its queue is in the
//     order in which each key's pending change first arrived.
//   - Deletes while the watch was down are seen only through the next
//     snapshot, as a Deleted event with FinalStateUnknown and the last state
//     the informer knew as Old. Use finalizers when a delete must never be missed.
//   - Freshness: the cache is eventually consistent with the API server.
//
// # Your responsibilities
//
//  1. Treat every object from a handler or lister as read-only; cache.Copy
//     it before changing it. Tests catch violations (cache's mutation
//     detector is on in test binaries).
//  2. Return from handlers promptly; map the object to a key and queue work
//     elsewhere (a workqueue).
//  3. Start the informer (or the factory) and wait for sync before trusting
//     the cache.
//
// # Memory
//
// An informer keeps one copy of each object and nothing per object besides
// the cache's map entries: no retained deltas, no per-object goroutines or
// closures, and the queues give their memory back once drained. By default
// it strips managedFields and makes cached objects share metadata that
// repeats between them (namespaces, label keys and values, whole label sets,
// owner references, the keys of a ConfigMap's data, the parts of pod specs
// that replicas repeat; Memory.Unshared turns that off). OfResource[*metav1.PartialObjectMetadata] caches only
// metadata, for controllers that need no more. Memory.Encoded keeps each object as its protobuf encoding, about
// half the bytes, and decodes it on every read (about a microsecond of CPU
// for a small ConfigMap, and a List of n objects n times that): for
// controllers that cache many objects and read few. Memory.EncodedUnder
// makes that choice from the memory budget (the Go memory limit, which
// kloop.App derives from the container's): encoded where the budget is
// under it, decoded, and fast to read, where it is not. Of and
// OfResource ask for protobuf for the built-in types, as client-go's
// generated clients do, and then decode watch events straight from the
// stream, never allocating the managedFields they would strip or a label
// map per object (see watcher.FromResource): short-lived decoding garbage
// interleaved with the objects a cache keeps leaves its heap fragmented.
// Custom resources have no protobuf; with client-go's ClientsAllowCBOR
// feature gate on (KUBE_FEATURE_ClientsAllowCBOR=true), their informers,
// typed and unstructured, accept CBOR, which an API server with its
// CBORServingAndStorage gate sends (fewer bytes, faster to decode) and
// one without answers in JSON instead.
//
// Below that, a controller can keep less than whole objects: SetTransform
// gives an informer a typed function that every object goes through before
// the cache and the handlers see it (client-go's SetTransform), to keep only
// the fields the controller reads.
//
// ReplayInterval (HandlerOptions) is what client-go calls resync: it
// re-delivers cached objects to one handler as Updated events with
// Old == New and Replay set; it never relists from the API server.
package informer
