// Package notifier sends a notification for every change to the
// Kubernetes objects it watches: kubewatch, built on kloop. It is the
// engine of cmd/notifier, internal so that the program's interface (its
// config file, variables, flags and commands) is the one users rely on.
//
// A Config (parsed from kubewatch's .kubewatch.yaml by ParseConfig) names
// the resources, built-in or custom, and the sinks. The notifier is
// assembled on a kloop.App like every kloop program: the App gives the
// logger, the metrics registry, /metrics and the probes, leader election
// and the one informer factory; New asks that factory for one informer
// per resource (kloop.Objects, or kloop.Unstructured for a custom
// resource) and adds the notifier to the App, whose Run runs it:
//
//	app, err := kloop.New(restCfg, kloop.Options{Name: "notifier", MetricsAddr: ":2112"})
//	...
//	if _, err := notifier.New(app, cfg, notifier.Options{}); err != nil { ... }
//	return app.Run(ctx)
//
// With leader election only the leader notifies: it loads the checkpoint
// when it takes over (see Checkpoint), so a new leader notifies what
// changed since the old one's last save.
//
// # What is notified
//
//   - create, update and delete of every watched object, as an Event with
//     kind, namespace, name, labels, the object (Secret data and stringData
//     values and kubectl's last-applied-configuration annotation redacted)
//     and, for an update, the changed field paths.
//   - Kind is the object's kind; for a custom resource it is the plural
//     resource name, as in kubewatch (and in the metrics' resourceType).
//   - Not the objects that existed at the first start: the informer's
//     initial list is told apart from later adds (no clock comparison,
//     so no creates lost to skew or to a slow worker). On later starts the
//     initial list is compared with the checkpoint, and what changed
//     while the notifier was down is notified (see Checkpoint).
//   - Not updates that change nothing: the same resourceVersion (replays,
//     relists) or no field besides resourceVersion, generation and
//     managedFields. UpdatePolicy also drops status-only and metadata-only
//     updates.
//
// # Sinks
//
// kubewatch's ten handlers, each a sink, plus log (a line on stdout):
//
//   - webhook: kubewatch's JSON body ({eventmeta, text, time}) byte for
//     byte by default; includeobject adds "object" and "oldObject"
//     (secrets redacted), includechanges the changed field paths, and a
//     cluster name adds "cluster". Its "time" is when the change was
//     seen, not when it was sent, so retries carry the same body.
//   - slackwebhook: a Slack incoming-webhook message.
//   - slack: chat.postMessage with a bot token (slack-go), one attachment
//     coloured by status, as the bot user.
//   - msteams: kubewatch's legacy MessageCard, or (card: adaptive) a
//     message with an Adaptive Card, as Teams Workflows webhooks take it.
//   - mattermost, flock, lark: their incoming-webhook bodies, as kubewatch
//     sends them.
//   - hipchat: a room notification, under a custom base URL if set.
//   - cloudevent: a CloudEvents 1.0 event in structured mode over HTTP
//     (the CloudEvents SDK), with kubewatch's type, source, id and data.
//   - smtp: a multipart/alternative mail (go-mail): implicit TLS on port
//     465, STARTTLS when requireTLS, AUTH chosen in the server's order
//     among CRAM-MD5, PLAIN and LOGIN, EHLO name, custom headers.
//
// A handler set only through its environment variables (KW_FLOCK_URL,
// ...) is configured, unlike in kubewatch. Each sink's text is kubewatch's
// (see Event.Message) unless it has a Go text/template of its own (see
// DefaultTemplate); a cluster name prefixes the text, as kubewatch's
// KUBEWATCH_NAME did. The template sees the event with Secret values
// already redacted, so no template can send them.
//
// Every sink has its own filter (event types, namespaces in and out,
// label selector, resources, and kubewatch's advanced filters judged on
// transitions: see advancedPass), bounded queue and worker, so a slow sink
// holds up no other. A delivery that fails with a network error, a 5xx or a
// 429 is retried with exponential backoff (RetryBase doubling up to
// RetryMax, at least Retry-After) up to the sink's MaxAttempts; a 4xx other
// than 429 (or a service's refusal: Slack's ok:false, a permanent SMTP
// reply) is not retried. Every give-up is logged and counted in
// kubewatch_events_failed_total{sink,reason}.
//
// # Incidents
//
// A sink with incidents: true gets incidents instead of a message per
// change (kubewatch's files leave it off, so their payloads stay
// kubewatch's). The changes of one object, or with
// incidents.groupbyowner of the objects one workload controls (a Pod
// stands for its Deployment through its ReplicaSet, by the
// pod-template-hash naming the deployment controller uses), are one
// incident: its first change opens it, later ones update it, and it
// resolves once every object in it is healthy or gone and no change came
// for incidents.window (5m). A member that turns unhealthy again after
// recovering is a flap: counted, not a new incident. The tracker
// (incidentTracker) is a pure core fed the clock (Options.Now); the
// notifier's ticker resolves what is due.
//
// Each incident has a stable id, a sequence number (rising with every
// change and the resolve) and a state (open, update, resolved), in the
// webhook payload ("incident", with "explanation") and in the CloudEvent's
// data and extension attributes (incidentid, incidentseq, incidentstate).
// Per handler: slack posts the first message, updates it in place
// (chat.update) and, on resolve, updates it once more and replies in its
// thread; webhook, cloudevent and log get every change; the others
// (slackwebhook, msteams, mattermost, flock, lark, hipchat, smtp), which
// cannot edit a message, get the open and the resolve only. A sink's
// first message of an incident is its open, whatever came before that its
// route did not pass; a resolve goes to the sinks that sent something of
// the incident. The open incidents, the resolves on their way and each
// sink's message references are kept in the checkpoint: a restart
// continues an incident with the same id and updates the same Slack
// message; a resolve not yet delivered is sent again (at least once).
//
// Explanations (Explanation) say why: for a Pod the reason (OOMKilled,
// CrashLoopBackOff, ImagePullBackOff, Evicted, Unschedulable with the
// scheduler's message, ...), exit code and termination reason, restart
// count and owning workload; for a workload its failed condition and
// ready replicas. With incidents.loglines the last lines of a failed
// container's previous log (pods/log, previous=true, through the API
// server, which asks the kubelet) are added, redacted by built-in and
// incidents.redact patterns; when the API server cannot serve them the
// explanation says so and why.
//
// # Routes and silences
//
// A sink's filter is its route: namespaces, kinds (filter.resources),
// labels and filter.severity, derived from the object: failed (a failed
// reason above, a Job's Failed condition), warning (a Warning Event, a
// Pod not ready, a workload short of ready replicas) or info. The
// silences section silences every sink by time of day (times, per
// namespace, in a time zone) and by `<prefix>/silence-until` (an
// annotation or label, RFC 3339 or 20060102T1504Z) on the object, its
// namespace or its owner (a Deployment's, for its Pods, once the
// notifier saw the Deployment: its kind must be watched); silenced changes still move incidents, but send nothing
// (kubewatch_events_suppressed_total{reason="silenced"}).
//
// # Full queues
//
// A full queue drops nothing. A change it cannot take is set aside with
// the other waiting changes of its object, and queued as soon as the
// worker makes room, objects in the order they first overflowed. While
// set aside, the changes of one object merge into one notification of its
// latest state: a create and its updates are one create; updates are one
// update naming the changed fields of all and the old object of the
// first; an update and a delete are the delete; a create and a delete
// (the receiver never heard of the object) are nothing; a delete and the
// create of a new object of the same name stay two. So a sink whose
// receiver is down holds at most two notifications per watched object
// beside its queue: memory is bounded by the objects watched, not by the
// changes they make. The checkpoint does not pass a change that a sink
// set aside until the sink delivered the notification that carries it, so
// what is still set aside at a stop or a crash is sent again by the next
// start. kubewatch_events_overflowed_total{sink} counts the changes that
// found the queue full, kubewatch_events_merged_total{sink} those merged
// into a later one, and kubewatch_sink_overflow_objects{sink} the objects
// waiting now. A receiver that stays down holds the checkpoint back for
// every sink: each restart then sends the other sinks again what it has
// not delivered (at least once).
//
// # Stricter than kubewatch, on purpose
//
//   - A taken metrics port is an error at start (kubewatch ran on without
//     metrics).
//   - Every HTTP handler checks the response status (kubewatch's did only
//     for msteams) and retries.
//   - SMTP credentials that no offered mechanism can use fail the
//     delivery (kubewatch sent without AUTH when the server offered none);
//     PLAIN and LOGIN refuse a connection without TLS, but to localhost.
//   - Unknown config keys and bad values are errors, all reported at once.
//
// # Guarantees
//
//   - Events of one sink are delivered one at a time, in the order they
//     were queued; the changes of one object in the order they were made.
//   - Nothing is lost across a restart or to a full queue, and nothing
//     notified is sent again (see Checkpoint and Full queues); delivery
//     is at least once. A sink gives up on a notification only after
//     MaxAttempts, or when its receiver refuses it.
//   - Run returns only after every goroutine it started has: on stop it
//     takes no new events and delivers what is queued for at most
//     DrainTimeout, counting the rest as failed with reason shutdown
//     (the next start sends those again).
//
// # Checkpoint
//
// The notifier keeps, per watched object, the uid, the resourceVersion and
// a hash of each top-level field of the last state it notified (or judged
// not worth a notification), in a ConfigMap (the default:
// kubewatch-checkpoint in the watched namespace, else the pod's; binaryData,
// gzipped JSON) or a file. A state enters the checkpoint only once every
// sink that took its notification delivered it (alone or merged into a
// later one, see Full queues) or gave up on it (retries exhausted,
// refused), and never ahead of an
// earlier change of the same object still in flight; the checkpoint is
// saved every Options.CheckpointInterval (1s) while it changes, and once
// more at the stop.
//
// On start, the informers' initial lists are compared with it: an object
// it lacks is notified as created, one whose resourceVersion moved as
// updated (Changes name the top-level fields that differ; OldObject is
// nil; the update policy applies), one it holds that is gone as deleted
// (from the checkpoint: kind, namespace, name, no object), one replaced
// by another of the same name as deleted and created. Delivery is at least
// once: a crash sends again what was delivered in the last interval before
// it, and what was in flight; it loses nothing. Without a checkpoint (the
// first start, a resource or namespace newly watched, type none) the
// initial list is not notified, as in kubewatch.
//
// The checkpoint holds at most checkpoint.maxobjects objects (10000), and
// a ConfigMap at most what fits in 900 KiB compressed (about 100 bytes an
// object before compression). Past either bound it is marked overflowed
// (kubewatch_checkpoint_objects reads -1): the next start notifies nothing
// that changed while the notifier was down, and nothing twice, then
// records again. The notifier needs get, create and update on its
// ConfigMap; it never notifies changes of the ConfigMap itself.
//
// # Not guaranteed
//
//   - Every intermediate state: a full queue merges the changes of one
//     object (see Full queues), and an informer that falls behind merges the
//     changes to one object (an add then an update is one add of the
//     latest state; an add then a delete is nothing at all), and a
//     restart sees only the latest state of what changed while down.
//   - Order across objects after a restart, and the old state of an
//     update made while down.
//
// # Metrics
//
// kubewatch_events_total{resourceType,eventType} (changes seen),
// kubewatch_events_sent_total{resourceType,eventType,sink},
// kubewatch_events_failed_total{sink,reason},
// kubewatch_events_suppressed_total{resourceType,reason},
// kubewatch_events_overflowed_total{sink}, kubewatch_events_merged_total{sink},
// kubewatch_sink_overflow_objects{sink} and kubewatch_checkpoint_objects.
package notifier
