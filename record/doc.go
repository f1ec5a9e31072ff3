// Package record writes Kubernetes Events about objects, built-in or
// custom, through the current Events API, events.k8s.io/v1 (the Events
// kubectl events and kubectl describe show, which core/v1 readers see too).
//
//	r, err := record.New(cfg, record.Options{Component: "foo-controller"})
//	go r.Start(ctx) // or let the manager run it
//	r.Event(foo, record.Warning, "SyncFailed", "deployment "+name+": "+err.Error())
//
// # Guarantees
//
//   - Event never blocks on the API server. It copies what it needs from the
//     object (apiVersion, kind, namespace, name, uid, resourceVersion), logs
//     the event through log/slog and queues it. When the queue (QueueSize) is
//     full the event is dropped and counted in
//     event_recorder_dropped_total{reason="queue_full"}; a reconcile is never
//     slowed down by events.
//   - An event is written as an events.k8s.io/v1 Event: regarding is the
//     object, reportingController Options.Component (the App's name),
//     reportingInstance Options.Host, reason and action the reason, note
//     the message, eventTime when it was first recorded. Event takes no
//     related object, so related is empty.
//   - Repeats make a series, not new objects: an event with the same
//     object, type, reason and message as one written before (and still
//     among the CacheSize most recent) updates that Event's series, by a
//     merge patch of series.count and series.lastObservedTime. As the
//     Events API counts, the second occurrence starts the series at 2.
//     Repeats queued together are folded into one write; every write
//     carries the count so far, so no heartbeat is needed to keep a series
//     current (client-go's reporter instead writes a series at most every
//     30 minutes). A repeat more than 6 minutes after the last one starts a
//     new Event, as a series ends after 6 minutes without one.
//   - Where the API server does not serve events.k8s.io/v1 (Start asks
//     discovery once), core/v1 Events are written instead: repeats add to
//     count and move lastTimestamp, source is Component and Host. If
//     discovery fails, events.k8s.io/v1 is assumed.
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
//   - An Event the API server has expired (an hour after its last write by
//     default) is created anew on the next repeat, without a series.
//   - Events written through events.k8s.io/v1 leave core/v1's count,
//     firstTimestamp, lastTimestamp and source empty (the API refuses
//     them); a core/v1 reader finds the count in series and the reporter in
//     reportingComponent.
//
// # Your responsibilities
//
//  1. Run Start (the manager does).
//  2. Register custom resource types in Options.Scheme, or pass objects
//     that carry their apiVersion and kind; otherwise the event is dropped
//     and counted as invalid.
//  3. Use the types Normal and Warning, and short UpperCamelCase reasons
//     (at most 128 bytes); an event with another type or an empty reason
//     is dropped and counted as invalid. Component must be a qualified
//     name, such as "foo-controller".
//  4. Grant create and patch on events in the events.k8s.io group, and in
//     the core group ("") for servers without it (samples/foo's
//     kubebuilder:rbac markers do).
package record
