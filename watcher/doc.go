// Package watcher turns an API server's LIST and WATCH into one ordered stream
// of typed events: the list/watch reflector (client-go's Reflector,
// kube-runtime's watcher) and the ListerWatchers it reads from.
//
// # Parts
//
//   - ListerWatcher[T] is the narrow view of one resource: List a page, open
//     a Watch. FromClient adapts a client-go typed client, or a dynamic or
//     metadata client's resource (unstructured or metadata-only objects,
//     *metav1.PartialObjectMetadata); FromResource any Go type (CRDs
//     included) through a REST client and a scheme. A Scope adds namespace, label and field
//     selectors.
//   - Reflector[T] runs the list/watch protocol and calls emit with Event[T]s.
//     Its logic is a pure state machine (no goroutines, I/O or clock) driven
//     by Run, which performs the calls, the waits and the emits.
//
// # The protocol
//
// A snapshot comes first. By default (InitialListAuto) it is a streaming list:
// a WATCH with sendInitialEvents=true and resourceVersionMatch=NotOlderThan
// that sends every object as ADDED and ends with a bookmark annotated
// "k8s.io/initial-events-end"; the reflector then closes that stream and
// watches from the bookmark's resourceVersion (a server compresses a streaming
// list, and every later event of the same stream one by one, which costs CPU
// on both ends for small events; a plain watch is not compressed). If
// the server rejects that request, the stream does not end properly, or it
// fails other than transiently, the reflector falls back to a paginated LIST (limit 500, continue tokens) with
// client-go's resourceVersion rules: the first list at "0" (may be served from
// the watch cache), a relist at the last delivered resourceVersion, a list at
// "" (the latest state, read consistently) after a 410 Gone or a "too large
// resource version" answer, and one unpaginated request after a continue token
// expired. Options.InitialList forces either mode.
//
// Then the reflector watches with bookmarks, from the last resourceVersion it
// delivered, each watch with a random timeout of 5–10 minutes (never less:
// Options.MinWatchTimeout has a floor of 5 minutes). A watch that ends
// normally is reopened at once from that resourceVersion, without a relist.
//
// Errors wait a backoff delay (800ms doubling to 30s, plus up to 100% jitter,
// back to 800ms after 2 quiet minutes), or the server's Retry-After when that
// is longer (capped at Backoff.Max), and then:
//
//   - a failed call (a LIST page, opening a streaming list or a watch) is
//     retried as it was: the same page, the streaming list, or a watch from
//     the same resourceVersion;
//   - a watch error event 410 Gone or "too large resource version" (in each
//     of the forms servers have used: the status cause, and the 504 Timeout
//     whose cause or message says so, before 1.18.6) starts a new snapshot;
//   - a watch error event 429 Too Many Requests, or one that the client made
//     because the stream broke (a 500 with cause UnexpectedServerResponse:
//     connection lost, health ping unanswered), resumes the watch from the
//     same resourceVersion;
//   - any other watch error event (a 500 StoreReadError for the unsafe
//     deletion of a corrupt object, an internal error of the server's
//     storage, a 403) starts a new snapshot, so that whatever the consumer
//     holds about the failing object is replaced by what the server can
//     serve. The error stays LastError until that snapshot completes.
//
// # Dead connections
//
// A connection that stays open but carries nothing (a dead load balancer, a
// half-open TCP connection) is noticed by client-go's HTTP/2 health check:
// after HTTP2_READ_IDLE_TIMEOUT_SECONDS (30 by default) without a frame it
// sends a ping and closes the connection if no answer comes within
// HTTP2_PING_TIMEOUT_SECONDS (15). So a silent watch ends within 45s, and
// the reflector resumes from its resourceVersion once a new connection
// succeeds. Where no ping can tell (HTTP/1.1, or a proxy that answers pings
// for a backend that is gone), the watch's own timeout does: the server ends
// every watch at its timeout, so the reflector stops one that is still open
// 30s after it (ErrWatchOverdue), at most 10.5 minutes after it opened, and
// watches again after a backoff.
//
// # Guarantees
//
//   - emit is called from Run's goroutine only, one event at a time, in the
//     order of the server's stream.
//   - A snapshot is RelistStart, one RelistItem per object, and RelistDone
//     with the snapshot's resourceVersion. Its items are emitted as they
//     arrive (per page of a paginated LIST, per event of a streaming list),
//     so that the consumer can build its state while the rest is still on
//     the wire. A listing that fails half-way and is started again (or a
//     Run that returns during it) leaves its snapshot without a RelistDone;
//     the next snapshot begins with a RelistStart of its own, and the
//     consumer drops what it had of the unfinished one. No object event or
//     bookmark comes between a RelistStart and its RelistDone.
//   - Every Run starts with a snapshot; after that, object events and
//     bookmarks follow with non-decreasing resourceVersions, until the next
//     snapshot.
//   - Objects handed to emit belong to the receiver; the reflector keeps no
//     reference to them after emit returns.
//   - Errors are kept: LastError returns the latest (nil after a successful
//     snapshot or watch) as an error that names the call and wraps the client's error, so that
//     apierrors.IsForbidden, IsNotFound and errors.Is on this package's
//     sentinels work. Options.OnError sees each one.
//   - Run returns nil only when ctx is done, having stopped its watch, and
//     starts no goroutine of its own.
//
// # Not guaranteed
//
//   - Deletes that happen while the watch is down are not seen as Deleted
//     events: the consumer learns of them from the next snapshot, which lacks
//     the object (a delete whose final state is unknown).
//   - A snapshot may be older than what another client has already seen
//     (the first LIST at resourceVersion "0" may come from a lagging watch
//     cache). Never older than what this reflector delivered before.
//   - Intermediate states are not all seen: an object changed twice while the
//     watch was down shows only its latest state.
//   - The reflector does not deduplicate: an object may appear in consecutive
//     snapshots unchanged.
package watcher
