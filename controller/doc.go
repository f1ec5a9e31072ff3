// Package controller is kloop's reconcile runtime: it turns informer
// events (cache.Event) into keys, keys into Reconcile calls, and Reconcile results
// into retries, delays or nothing.
//
// A Controller[K] owns a workqueue of keys of type K. Sources feed it: For
// (the primary type, keyed by its own namespace/name as a cache.Key), Owns
// (objects mapped to their controller owner's key through ownerReferences)
// and Watches (any type, through a function from object to keys).
// Predicates decide which events count. A source's predicates and key
// mapping run on the informer's own goroutine as it applies each change,
// and add keys to the queue there: no queue or goroutine per source between
// the informer and the workqueue (so they must be quick and never block).
// Workers take keys from the queue and call the Reconciler.
//
// # Guarantees
//
//   - One key is never reconciled by two workers at once; keys enqueued while
//     their key is being reconciled are folded into one later call.
//   - Workers start only after every source has delivered its initial state
//     (or Start fails with ErrSyncFailed wrapping the source's error, such as
//     a 403 from the API server, after Options.SyncTimeout).
//   - Result and error mean one thing each: an error is retried with the
//     rate limiter's growing delay (RequeueAfter is then ignored, with a
//     warning); TerminalError is logged and counted but not retried;
//     RequeueAfter alone reconciles the key again after that long;
//     Requeue alone reconciles it again at once, without back-off and
//     without counting a failure; a panic is recovered, counted and
//     retried like an error.
//   - Start returns only once every worker has exited. On stop no new key
//     is handed out; Reconcile calls in flight finish, or see their context
//     cancelled with cause ErrDrainTimeout after Options.DrainTimeout.
//   - Restrict keeps the controller to the keys a predicate admits (a
//     replica's shard): rejected keys are dropped when they come out of the
//     queue, and Restrict returns once no Reconcile of a rejected key is in
//     flight, so their new owner can start without overlap.
//   - Every reconcile knows why it ran: CausesFrom(ctx) returns the
//     triggers merged into it (the source, For, Owns or Watches, and the
//     object's kind, namespace/name, resourceVersion and change; or the
//     controller's own Retry, RequeueAfter, Enqueue), the first few of each
//     source and kind (at most 8) and how many there were. A change whose
//     resourceVersion is one the program's own client wrote
//     (Options.OwnWrite; an App sets it) is marked Own. The reconcile's
//     Debug lines and its failure lines carry them as "causes".
//   - Hot loops are found from the causes, not guessed from rates: a key
//     reconciled 10 times in a row within 30 s, each time woken only by the
//     program's own writes, is listed in Status.HotLoops (and on the debug
//     page) and warned of once per key per 10 minutes; every such
//     reconcile counts in kloop_controller_self_triggered_reconciles_total.
//   - Delays follow Options.Clock (default the real clock): RequeueAfter,
//     the default rate limiter's back-off and Debounce wait on it, so a
//     test steps a fake clock (k8s.io/utils/clock/testing) instead of
//     waiting; a kloop App gives its controllers its own
//     (kloop.Options.Clock).
//   - Options.Debounce holds a key that sources trigger until its triggers
//     pause for Debounce, and at most DebounceBound × Debounce from the
//     first trigger it held.
//   - Metrics carry controller-runtime's names and labels:
//     controller_runtime_reconcile_total{controller,result},
//     controller_runtime_reconcile_errors_total,
//     controller_runtime_terminal_reconcile_errors_total,
//     controller_runtime_reconcile_panics_total,
//     controller_runtime_reconcile_timeouts_total,
//     controller_runtime_reconcile_time_seconds,
//     controller_runtime_active_workers and
//     controller_runtime_max_concurrent_reconciles, next to the workqueue's
//     workqueue_* families.
//
// # Not guaranteed
//
//   - Causes are for understanding, not for deciding what to do: a trigger
//     that arrives just as its key is handed to a worker may be counted in
//     that reconcile, and the next reconcile then has none. Own is matched
//     by resourceVersion among the client's latest few thousand writes; a
//     delete is never marked Own.
//   - The reconciler is not told what changed, and may be called for an
//     object that is gone or that changed again since the event: it must
//     read the current state and be idempotent.
//   - A cache read in Reconcile may not yet show the reconciler's own
//     writes. Use client's read-your-writes reads, or wait for the
//     resourceVersion a write returned (cache.Lister.WaitFor), before
//     deciding that something you created is missing.
//   - Deletes are seen at most once and may be missed while a watch is down;
//     they then arrive from the next relist, with cache.Event.FinalStateUnknown
//     set, and still map to owners. Use finalizers for cleanup that must
//     happen.
//
// # Your responsibilities
//
//  1. Treat objects from sources and listers as read-only; copy before
//     changing them (cache.Copy).
//  2. Return an error to be retried, TerminalError when retrying cannot
//     help, Result{RequeueAfter} to look again later, Result{Requeue: true}
//     to go on at once (the next step of a long task).
//  3. Honour ctx in Reconcile: it carries the per-reconcile timeout and the
//     stop.
//  4. Log through LoggerFrom(ctx): its lines carry the controller, the key
//     and an id of the Reconcile call.
package controller
