// Package record writes Kubernetes Events (core/v1, the ones kubectl
// describe shows) about objects, built-in or custom.
//
//	r, err := record.New(cfg, record.Options{Component: "foo-controller"})
//	go r.Start(ctx) // or let the manager run it
//	r.Eventf(foo, record.Warning, "SyncFailed", "deployment %s: %v", name, err)
//
// # Guarantees
//
//   - Event never blocks on the API server. It copies what it needs from the
//     object (apiVersion, kind, namespace, name, uid, resourceVersion), logs
//     the event through log/slog and queues it. When the queue (QueueSize) is
//     full the event is dropped and counted in
//     event_recorder_dropped_total{reason="queue_full"}; a reconcile is never
//     slowed down by events.
//   - Repeats are aggregated: an event with the same involved object, type,
//     reason and message as one written before (and still among the
//     CacheSize most recent) adds to that Event's count and moves its
//     lastTimestamp, by a merge patch, instead of creating another Event.
//     Repeats queued together are folded into one write.
//   - Start owns the only goroutine that writes (the caller's), and New starts
//     none. When Start's context ends, Event stops accepting events and Start
//     writes what is queued, for at most DrainTimeout, before it returns.
//   - Events about cluster-scoped objects are written to the "default"
//     namespace, as kubectl expects.
//
// # Non-guarantees
//
//   - Delivery. Events are best effort: a failed write is logged and counted
//     (event_recorder_events_total{result="failed"}), not retried. Do not use
//     Events as a data channel.
//   - No spam filter beyond aggregation: every distinct message is its own
//     Event. Keep messages free of values that change on every call.
//   - An Event the API server has expired (after an hour by default) is
//     created anew on the next repeat, with count 1.
//
// # Your responsibilities
//
//  1. Run Start (the manager does).
//  2. Register custom resource types in Options.Scheme, or pass objects
//     that carry their apiVersion and kind; otherwise the event is dropped
//     and counted as invalid.
//  3. Use the types Normal and Warning, and short UpperCamelCase reasons.
//  4. Grant create and patch on events.
package record
