// Package client reads and writes Kubernetes objects of any Go type, built-in
// or custom, without generated clientsets, and lets a controller read its own
// writes back from a cache.
//
// # Parts
//
//   - Client holds the connection (one HTTP client and rate limiter for all
//     resources), a scheme and a field manager. New builds it from a
//     rest.Config; it does no I/O and starts no goroutines.
//   - Resource[T] is one type at one GroupVersionResource, from NewResource:
//     Get, List, Create, Update, UpdateStatus, Patch (merge, JSON, strategic
//     merge, apply), Apply (server-side apply of a typed object) and Delete.
//     Every call goes to the API server and returns its errors unchanged, so
//     apierrors.IsNotFound, IsConflict and IsAlreadyExists work.
//   - Every Client records the resourceVersion of each of its successful
//     writes, until a CachedReader sees its cache catch up.
//   - CachedReader[T] reads a cache (a cache.Store, or anything with the
//     Cache methods) after waiting until the cache has seen this client's
//     writes of the keys read.
//
// # Read your writes
//
// An informer's cache lags the API server. A controller that creates an
// object and is asked to reconcile again before the cache has the object
// would see it missing and create it twice; one that updates an object
// would act on the version before its update. CachedReader closes that gap
// for the client's own writes:
//
//   - After a write through the client returned resourceVersion N for a key,
//     CachedReader.Get of that key returns the cache's object only once the
//     cache holds it at N or later, or has as a whole reached N (which also
//     covers a delete). A delete answered with only a Status (most built-in
//     resources) is seen once the cache no longer holds the deleted UID.
//   - CachedReader.List waits for every pending write in the namespace.
//   - Each wait is bounded (ReaderOptions.MaxWait, 10s by default). On
//     timeout the read fails with an error that is ErrCacheStale (errors.Is),
//     instead of returning data from before the write; return it from the
//     reconciler to retry later.
//   - resourceVersions are compared as integers (comparable resource
//     versions, KEP-5504, GA in Kubernetes 1.35). A write whose
//     resourceVersion is not an integer is logged and not waited for.
//
// # Non-guarantees
//
//   - Writes by anyone else (other clients, other programs, the API
//     server's own controllers) are eventually consistent: a cached read may
//     not reflect them yet.
//   - A write that failed, or whose response was lost (a timeout after the
//     server applied it), is not recorded.
//   - Waiting needs the cache to see events for the key. A key outside the
//     cache's namespace or label selector is seen only when the cache's
//     resourceVersion passes the write (another event, or the API server's
//     periodic watch bookmark), which may exceed MaxWait.
//   - A tracker entry is cleared by the first CachedReader whose cache has
//     seen it: a read of it, or any read of its resource once the cache's
//     resourceVersion has passed it (a delete confirmed without a
//     resourceVersion waits for a read of its key or namespace). If one
//     client's writes are read through two caches of the
//     same resource, only the first read waits; use one shared cache per
//     resource (as an informer factory provides), or one client per cache.
//
// # Your responsibilities
//
//  1. Register every type used with NewResource, and its list type, in
//     Options.Scheme (for custom resources: a scheme with both the built-in
//     types and your API group).
//  2. Treat objects returned by CachedReader as read-only; they are the
//     cache's. Objects returned by Resource are yours.
//  3. For Apply, build an object holding only the fields you mean to own.
//  4. Set Options.DisableWriteTracking on clients whose writes are never read
//     through a CachedReader, or their tracker keeps an entry per key
//     written.
package client
