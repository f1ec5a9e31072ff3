// Package kloopfake runs a kloop App without an API server, for unit tests
// of reconcile functions written against kloop.Handle.
//
// Server is a Kubernetes REST API served from memory by an
// http.RoundTripper: its Config is a rest.Config whose requests never
// leave the process. Everything above the wire is kloop's own code, the
// same as in production: the App, its Handles, the client and its
// read-your-writes tracking, the informers (streaming lists, watches,
// bookmarks), discovery and the event recorder. So a reconcile function
// needs no interface or fake of its own to be tested: build its Handles
// on an App on the server (kloop.New with Server.Config), start the caches with Start, call Reconcile, and
// check what the Server holds.
//
//	srv, _ := kloopfake.NewServer(kloopfake.Options{Scheme: scheme, Objects: []runtime.Object{foo}})
//	app, _ := kloop.New(srv.Config(), kloop.Options{Name: "foo-controller", Scheme: scheme})
//	r := &Reconciler{Foos: kloop.Objects[*v1alpha1.Foo](app), Deployments: kloop.Objects[*appsv1.Deployment](app)}
//	stop, _ := kloopfake.Start(ctx, app)
//	defer stop()
//	res, err := r.Reconcile(ctx, cache.Key{Namespace: "default", Name: "foo"})
//
// # What it does as the API server does
//
//   - resourceVersion: one counter for the whole server; every change of
//     an object moves it on. An update or patch that changes nothing
//     writes nothing: same resourceVersion, no watch event.
//   - Create: AlreadyExists for a name in use; generateName; a uid,
//     creationTimestamp and metadata.generation 1 are set; a status is
//     dropped for a kind with a status subresource; a resourceVersion in
//     the object is refused.
//   - Get, Update, Patch, Delete of a missing object: NotFound.
//   - Update and Patch: a resourceVersion in the object (or the patched
//     object) is a precondition, Conflict when stale; without one the
//     update is unconditional. A uid that differs is a Conflict too.
//   - Status subresource, for kinds whose Go type has a Status field
//     (Resource.NoStatusSubresource turns it off): Update keeps the
//     stored status, UpdateStatus (and a patch of "status") changes only
//     the status. Without one, Update writes the status and "status" is
//     NotFound, as for a CRD without subresources. Discovery lists it.
//   - metadata.generation goes up with any change outside metadata (and
//     outside status, with a status subresource), and when a delete sets
//     deletionTimestamp.
//   - Finalizers: a delete of an object with finalizers sets
//     deletionTimestamp (once) and the object stays until an update or
//     patch takes off the last one; adding a finalizer meanwhile is
//     Invalid. A built-in kind answers a completed delete with a Status,
//     a custom one with the object. Delete preconditions and dry runs
//     work.
//   - Owner references are stored as given.
//   - Patches: JSON merge patch, JSON patch, strategic merge patch for
//     built-in kinds (a custom kind is refused with 415, as the API server
//     does), and server-side apply through apimachinery's field manager.
//   - Lists and watches of one namespace or all, by label selector and by
//     field selector on metadata.name and metadata.namespace. An object
//     that comes into a watch's selectors is ADDED, one that leaves them
//     DELETED. Streaming lists end with the initial-events-end bookmark;
//     bookmarks tell progress a watch cannot see otherwise (writes outside
//     it), so the App's cached reads do not wait for them.
//   - Intercept fails chosen requests with the error a busy cluster gives
//     (a Conflict, a 500), to test a reconcile's error paths.
//
// # What it does not do
//
//   - No admission: no webhooks, no validation beyond names and
//     namespaces, no defaulting; a CRD's schema is not applied (nothing is
//     pruned or refused).
//   - No garbage collection: dependents outlive their owners, and a
//     propagationPolicy changes nothing (Foreground and Orphan add no
//     finalizer).
//   - No controllers of Kubernetes: no ReplicaSets for Deployments, no
//     Pods, no Job completion, no namespace lifecycle (namespaces need not
//     exist). A test writes those objects itself (Options.Objects, or a client).
//   - No version conversion: each version of a kind is a resource of its
//     own, with objects of its own.
//   - Field selectors on anything but metadata.name and metadata.namespace
//     are a BadRequest.
//   - Reads are always of the latest state: a list's resourceVersion,
//     limit and continue are ignored (one page), and nothing is ever too
//     old (no 410 Gone). Every change is kept in memory for the Server's
//     life, for watches to start from.
//   - No Table or PartialObjectMetadata responses (informer.OfResource[*metav1.PartialObjectMetadata]),
//     no subresources but status (no scale, eviction, binding), no
//     deletecollection, no authentication or authorization.
//   - Server-side apply: managed fields are recorded by apply alone;
//     Create, Update and Patch record no field manager, so their fields
//     conflict with no apply. Custom kinds merge by a schema deduced from
//     the object, so their lists are atomic whatever the CRD's
//     x-kubernetes-list-type says. The first apply of a built-in kind
//     parses client-go's OpenAPI schemas (about half a second).
//   - Scope: the built-in cluster-scoped kinds are known; every other kind
//     is namespaced unless a Resource says ClusterScoped. Resource names
//     are guessed from kinds (Endpoints → endpoints, Ingress → ingresses)
//     unless a Resource names them.
//
// It is for unit tests of a reconcile's decisions. It does not stand in
// for end-to-end tests against a real API server (the testenv package):
// what admission, defaulting, garbage collection and Kubernetes'
// controllers do is not here.
package kloopfake
