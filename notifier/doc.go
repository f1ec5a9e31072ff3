// Package notifier sends a notification for every change to the
// Kubernetes objects it watches: kubewatch, built on kloop.
//
// A Config (parsed from kubewatch's .kubewatch.yaml by ParseConfig) names
// the resources, built-in or custom, and the sinks. New registers one
// informer per resource on a single informer.Factory; Run runs them and the
// sinks under a manager.Manager until its context is done.
//
// # What is notified
//
//   - create, update and delete of every watched object, as an Event with
//     kind, namespace, name, labels, the object (Secret data and stringData
//     values and kubectl's last-applied-configuration annotation redacted)
//     and, for an update, the changed field paths.
//   - Kind is the object's kind; for a custom resource it is the plural
//     resource name, as in kubewatch (and in the metrics' resourceType).
//   - Not the objects that existed when the notifier started: the
//     informer's initial list is told apart from later adds (no clock
//     comparison, so no creates lost to skew or to a slow worker).
//   - Not updates that change nothing: the same resourceVersion (replays,
//     relists) or no field besides resourceVersion, generation and
//     managedFields. UpdatePolicy also drops status-only and metadata-only
//     updates.
//
// # Sinks
//
// webhook (kubewatch's JSON payload plus "changes" and "object"; its
// "time" is when the change was seen, not when it was sent, so retries
// carry the same body),
// slackwebhook (a Slack incoming-webhook message) and log (a line on
// stdout). Every sink has its own filter (event types, namespaces in and
// out, label selector, resources), bounded queue and worker, so a slow sink
// holds up no other. A delivery that fails with a network error, a 5xx or a
// 429 is retried with exponential backoff (RetryBase doubling up to
// RetryMax, at least Retry-After) up to the sink's MaxAttempts; a 4xx other
// than 429 is not retried. Every give-up is logged and counted in
// kubewatch_events_failed_total{sink,reason}.
//
// # Guarantees
//
//   - Events of one sink are delivered one at a time, in the order they
//     were queued.
//   - Run returns only after every goroutine it started has: on stop it
//     takes no new events and delivers what is queued for at most
//     DrainTimeout, counting the rest as failed with reason shutdown.
//
// # Not guaranteed
//
//   - Every intermediate state: an informer that falls behind merges the
//     changes to one object (an add then an update is one add of the
//     latest state; an add then a delete is nothing at all). Changes while
//     the notifier is down, or before Synced, are not notified (they are
//     part of its initial list).
//   - Delivery across restarts: queues live in memory.
//
// # Metrics
//
// kubewatch_events_total{resourceType,eventType} (changes seen),
// kubewatch_events_sent_total{resourceType,eventType,sink},
// kubewatch_events_failed_total{sink,reason} and
// kubewatch_events_suppressed_total{resourceType,reason}.
package notifier
