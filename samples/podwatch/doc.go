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
// Options.MaxRetries (5) times; then the pod is forgotten and the
// controller logs an error with the pod's key and the sync's error. One
// worker by default, so lines come one at a time.
//
// As in the example, the cache is seeded before the start with a pod that
// does not exist (Missing, "mypod", in the watched namespace), so the first
// sync prints "Pod <namespace>/mypod does not exist anymore": a seeded
// cache (informer.Informer.Seed, through Handle.Informer) is how an informer
// starts from known state, and its first list then reports the difference.
//
// Where the example wires an informer, a rate-limited queue, a worker loop
// and a retry function by hand, here a kloop.App holds one handle on pods
// and one controller whose reconcile only prints and returns errors; the
// controller's MaxRetries carries the retry policy, and the App runs it
// all and drains the sync in flight on stop.
//
// Guarantees: each pod key is synced by one worker at a time; a pod seen
// gone prints the "does not exist anymore" line once per delete event
// (deletes missed while the watch was down show up after the next relist).
// Not guaranteed: every intermediate state of a pod is seen; a sync reads
// the cache's latest state, not the event's.
package podwatch
