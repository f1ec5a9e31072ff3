// Package podwatch is client-go's workqueue example (examples/workqueue)
// done the kloop way: it watches the pods of one namespace and prints one
// line per pod it syncs.
//
// Output, on the writer given as Options.Out (stdout in cmd/podwatch), one
// line per sync, exactly as the client-go example prints them:
//
//	Sync/Add/Update for Pod <name>
//	Pod <namespace>/<name> does not exist anymore
//
// Retry policy, as in the example: a failed sync is retried with the
// rate limiter's growing delay while it has been retried fewer than
// Options.MaxRetries (5) times; then the pod is forgotten and the log says
// "Dropping pod out of the queue" with the pod's key and the error. One
// worker by default, so lines come one at a time.
//
// Where the example wires an informer, a rate-limited queue, a worker loop
// and a retry function by hand, here an informer.Factory feeds a
// controller.Controller whose Reconciler only prints and returns errors;
// the controller's MaxRetries and Dropped carry the retry policy, and a
// manager.Manager runs it all and drains the sync in flight on stop.
//
// Guarantees: each pod key is synced by one worker at a time; a pod seen
// gone prints the "does not exist anymore" line once per delete event
// (deletes missed while the watch was down show up after the next relist).
// Not guaranteed: every intermediate state of a pod is seen; a sync reads
// the cache's latest state, not the event's.
package podwatch
