package watcher

import (
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// This file is the reflector's pure core: a state machine with no goroutines,
// no I/O and no clock. Its inputs are the results of the calls it asked for
// (listed, watchOpened, received, closed, timerFired), each with the time it
// happened; its outputs are the events to emit and the next action (act).
// Run in reflector.go is the shell that performs the actions.

// initialEventsIdle bounds the silence of a streaming list before the
// initial-events-end bookmark. A server that accepts sendInitialEvents but
// never sends the bookmark (some aggregated API servers) would otherwise hold
// the reflector until the watch times out, minutes later.
const initialEventsIdle = 30 * time.Second

// watchMinLife: a watch that closes sooner than this without any event counts
// as a failure (ErrWatchClosedEarly).
const watchMinLife = time.Second

// watchTimeoutGrace is how long past its timeout a watch may stay open
// before the reflector stops it (ErrWatchOverdue). The server ends every
// watch at its timeout; one that goes on is on a connection whose other
// end is gone although the connection looks alive (a proxy that answers
// HTTP/2 pings for a dead backend, a half-open HTTP/1.1 connection).
const watchTimeoutGrace = 30 * time.Second

type actionKind uint8

const (
	actList    actionKind = iota + 1 // call List(opts), then listed
	actWatch                         // call Watch(opts), then watchOpened
	actReceive                       // take the next event of the open watch: received or closed; if delay > 0 and nothing arrives within it, timerFired
	actWait                          // wait delay, then timerFired
)

var actionNames = [...]string{"", "list", "watch", "receive", "wait"}

func (k actionKind) String() string { return actionNames[k] }

type action struct {
	kind  actionKind
	op    opName             // actList, actWatch: which call
	opts  metav1.ListOptions // actList, actWatch
	delay time.Duration      // actWait: the wait; actReceive: time until timerFired if nothing arrives, 0 = none
}

type phase uint8

const (
	phaseList   phase = iota + 1 // paginated LIST towards a snapshot
	phaseStream                  // streaming list (watch with initial events) towards a snapshot
	phaseWatch                   // watching from lastRV
)

type machine[T Object] struct {
	cfg  resolved
	log  *slog.Logger
	bo   backoffState
	act  action // what the shell does next
	wait time.Duration

	phase phase
	open  bool // the shell holds an open watch (phaseStream or phaseWatch)

	lastRV    string // the newest resourceVersion delivered to the consumer
	rvGone    bool   // lastRV is expired or unknown to the server: the next snapshot is a consistent read of the latest state
	streamOff bool   // the server rejected a streaming list: paginated LIST from now on (InitialListAuto)
	pagedAt0  bool   // a LIST at resourceVersion "0" came back paginated: the watch cache is off, always page

	// Paginated LIST in progress.
	listRV    string // resourceVersion the list was asked at
	limit     int64
	cont      string // continue token of the next page
	fullRetry bool   // a continue token expired: list again in one response

	// The snapshot in progress. Its items are emitted as they arrive;
	// begun says RelistStart has been emitted for it. A listing that is
	// abandoned and started again begins with a RelistStart of its own,
	// which tells the consumer to drop what it had of the unfinished one.
	begun  bool
	snapRV string // a paginated list's resourceVersion, from its first page

	watchStart    time.Time
	watchEvents   int
	watchDeadline time.Time // a plain watch still open then is stopped (watchTimeoutGrace)

	now time.Time // time of the latest input

	out     [2]Event[T] // backing store for results of one or two events
	lastErr error
}

func newMachine[T Object](cfg resolved) *machine[T] {
	m := &machine[T]{
		cfg: cfg,
		log: cfg.logger.With("reflector", cfg.name),
		bo:  backoffState{cfg: cfg.backoff},
	}
	m.restart()
	return m
}

// restart begins a fresh snapshot at once, forgetting any call in flight.
// Run calls it on entry: events of an earlier Run may never have reached the
// consumer, so a new Run always starts with a snapshot.
func (m *machine[T]) restart() {
	m.wait = 0
	m.startSync()
	m.plan()
}

// startSync begins a new snapshot with a streaming list or a paginated LIST.
func (m *machine[T]) startSync() {
	m.open = false
	m.begun, m.snapRV = false, ""
	if m.cfg.mode == InitialListStreaming || (m.cfg.mode == InitialListAuto && !m.streamOff && m.cfg.listOptions == nil) {
		m.phase = phaseStream
		return
	}
	m.startList()
}

func (m *machine[T]) startList() {
	m.phase = phaseList
	m.begun, m.snapRV = false, ""
	m.cont, m.fullRetry = "", false
	// resourceVersion semantics as client-go's: the first list may be served
	// from the watch cache ("0", any state); a relist asks for a state no
	// older than what the consumer has; after 410 or "too large", a
	// consistent read of the latest state ("").
	switch {
	case m.rvGone:
		m.listRV = ""
	case m.lastRV == "":
		m.listRV = "0"
	default:
		m.listRV = m.lastRV
	}
	switch {
	case m.cfg.pageSize > 0:
		m.limit = m.cfg.pageSize
	case m.cfg.pageSize < 0:
		m.limit = 0
	case m.pagedAt0:
		m.limit = DefaultPageSize
	case m.listRV != "" && m.listRV != "0":
		// A limit would turn "not older than lastRV" into "exactly lastRV",
		// which only etcd can serve; without it the watch cache answers.
		m.limit = 0
	default:
		m.limit = DefaultPageSize
	}
}

// plan sets act from the state. It is the only place that draws random watch
// timeouts.
func (m *machine[T]) plan() {
	if m.wait > 0 {
		m.act = action{kind: actWait, delay: m.wait}
		return
	}
	switch m.phase {
	case phaseList:
		opts := metav1.ListOptions{Limit: m.limit}
		switch {
		case m.fullRetry:
			opts.ResourceVersion, opts.Limit = m.listRV, 0
		case m.cont != "":
			// The token carries the snapshot; a resourceVersion must not be sent with it.
			opts.Continue = m.cont
		default:
			opts.ResourceVersion = m.listRV
		}
		m.act = action{kind: actList, op: opList, opts: opts}
	case phaseStream:
		if m.open {
			m.act = action{kind: actReceive, delay: initialEventsIdle}
			return
		}
		rv := m.lastRV
		if m.rvGone {
			rv = ""
		}
		sendInitial := true
		m.act = action{kind: actWatch, op: opWatchList, opts: metav1.ListOptions{
			ResourceVersion:      rv,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			SendInitialEvents:    &sendInitial,
			AllowWatchBookmarks:  true,
			TimeoutSeconds:       m.watchTimeout(),
		}}
	case phaseWatch:
		if m.open {
			m.act = action{kind: actReceive, delay: max(m.watchDeadline.Sub(m.now), time.Nanosecond)}
			return
		}
		m.act = action{kind: actWatch, op: opWatch, opts: metav1.ListOptions{
			ResourceVersion:     m.lastRV,
			AllowWatchBookmarks: true,
			TimeoutSeconds:      m.watchTimeout(),
		}}
	}
}

func (m *machine[T]) watchTimeout() *int64 {
	lo := m.cfg.minWatchTimeout.Seconds()
	s := int64(lo + m.cfg.rand()*lo)
	return &s
}

// fail records a failed call and schedules a retry after a backoff. The
// phase is left as it is, so the retry repeats the call that failed.
func (m *machine[T]) fail(now time.Time, op opName, err error) error {
	e := &opError{Op: op, Resource: m.cfg.name, Err: err}
	m.lastErr = e
	m.wait = m.delay(now, err)
	m.plan()
	return e
}

// delay is the wait after a failure: the next backoff delay, or the delay
// the server asked for (Retry-After) if that is longer, up to Backoff.Max.
func (m *machine[T]) delay(now time.Time, err error) time.Duration {
	d := m.bo.next(now, m.cfg.rand())
	if ra := min(retryAfter(err), m.cfg.backoff.Max); ra > d {
		d = ra
	}
	return d
}

// report records an error that needs no retry.
func (m *machine[T]) report(op opName, err error) error {
	e := &opError{Op: op, Resource: m.cfg.name, Err: err}
	m.lastErr = e
	m.plan()
	return e
}

// relist starts a new snapshot after the watch's resourceVersion expired.
// It waits a backoff first: it spreads the relists of many clients after a
// server restart, and grows if relists keep failing the same way.
func (m *machine[T]) relist(now time.Time, err error) {
	m.log.Info("watch resourceVersion expired, relisting", "rv", m.lastRV, "err", err)
	m.startSync()
	m.wait = m.delay(now, err)
	m.plan()
}

// relistFailed starts a new snapshot after a backoff because the watch
// failed in a way that says nothing good about the cache: the server sent an
// error event that is neither about the resourceVersion nor a request to
// slow down (a corrupt object's StoreReadError, an internal error of the
// server's storage, a permission revoked mid-watch). Watching on from the
// same resourceVersion could replay the same failure for ever and keep
// what the cache holds about the failing object; a snapshot replaces it.
// The error is reported and stays LastError until the snapshot completes.
func (m *machine[T]) relistFailed(now time.Time, err error) error {
	e := &opError{Op: opWatch, Resource: m.cfg.name, Err: err}
	m.lastErr = e
	m.log.Info("watch failed, relisting", "rv", m.lastRV, "err", err)
	m.startSync()
	m.wait = m.delay(now, err)
	m.plan()
	return e
}

// begin returns evs with the RelistStart of the snapshot in progress
// appended, if it has not been emitted yet.
func (m *machine[T]) begin(evs []Event[T]) []Event[T] {
	if m.begun {
		return evs
	}
	m.begun = true
	return append(evs, Event[T]{Type: RelistStart})
}

// finish completes the snapshot at rv, appending its RelistDone (and its
// RelistStart if nothing of it was emitted yet) to evs, and moves to
// watching: a watch from rv.
// A streaming list's stream is closed and replaced by that watch rather than
// kept as the watch. An API server that supports compression answers a
// streaming list gzip-compressed (WatchListCompression) and keeps compressing
// the stream after the initial events, each flush, usually each event, as a
// gzip member of its own: about 14 µs of the server's CPU per event and
// watcher, and 4 µs of the client's, where a plain watch costs neither. The
// initial events, where compression pays, stay compressed; one more request
// per snapshot is the price.
func (m *machine[T]) finish(evs []Event[T], rv string) []Event[T] {
	out := append(m.begin(evs), Event[T]{Type: RelistDone, ResourceVersion: rv})
	m.begun, m.snapRV = false, ""
	m.lastRV, m.rvGone, m.lastErr = rv, false, nil
	m.phase = phaseWatch
	m.open = false
	m.plan()
	return out
}

// timerFired: a wait is over, or a streaming list was silent for too long.
func (m *machine[T]) timerFired(now time.Time) error {
	m.now = now
	if m.wait > 0 {
		m.wait = 0
		m.plan()
		return nil
	}
	if m.phase == phaseStream && m.open {
		return m.streamFailed(now, fmt.Errorf("%w: no event for %v", ErrInitialEventsEndMissing, initialEventsIdle))
	}
	if m.phase == phaseWatch && m.open {
		if now.Before(m.watchDeadline) {
			m.plan()
			return nil
		}
		m.open = false
		return m.fail(now, opWatch, fmt.Errorf("%w: opened %v ago", ErrWatchOverdue, now.Sub(m.watchStart).Round(time.Second)))
	}
	return nil
}

// listed takes the result of the List call asked for by act.
func (m *machine[T]) listed(now time.Time, page ListPage[T], err error) ([]Event[T], error) {
	m.now = now
	if err != nil {
		gone := isExpired(err) || isTooLargeRV(err)
		switch {
		case gone && m.cont != "":
			// The continue token expired (the snapshot it points into was
			// compacted away). Paging again could expire again; ask for
			// the whole list in one response instead, as client-go's pager does.
			m.log.Info("list continue token expired, listing again in one request", "rv", m.listRV, "err", err)
			m.cont, m.fullRetry = "", true
			m.begun = false
			m.plan()
			return nil, nil
		case gone && m.listRV != "":
			m.log.Info("list resourceVersion unavailable, listing the latest state", "rv", m.listRV, "err", err)
			m.rvGone = true
			m.startList()
			m.plan()
			return nil, nil
		}
		return nil, m.fail(now, opList, err)
	}

	evs := make([]Event[T], 0, len(page.Items)+2)
	if !m.begun {
		m.snapRV = page.ResourceVersion
		if m.listRV == "0" && page.Continue != "" && !m.fullRetry {
			m.pagedAt0 = true
		}
		evs = m.begin(evs)
	}
	for _, obj := range page.Items {
		evs = append(evs, Event[T]{Type: RelistItem, Object: obj, ResourceVersion: obj.GetResourceVersion()})
	}
	if page.Continue != "" && !m.fullRetry {
		m.cont = page.Continue
		m.plan()
		return evs, nil
	}
	if m.snapRV == "" {
		m.startList()
		return evs, m.fail(now, opList, ErrNoResourceVersion)
	}
	return m.finish(evs, m.snapRV), nil
}

// watchOpened takes the result of the Watch call asked for by act.
func (m *machine[T]) watchOpened(now time.Time, err error) error {
	m.now = now
	if err == nil {
		m.open = true
		m.watchStart, m.watchEvents = now, 0
		if t := m.act.opts.TimeoutSeconds; t != nil {
			m.watchDeadline = now.Add(time.Duration(*t)*time.Second + watchTimeoutGrace)
		}
		if m.phase == phaseStream {
			m.begun = false
		} else {
			m.lastErr = nil
		}
		m.plan()
		return nil
	}
	if m.phase == phaseStream {
		return m.streamFailed(now, err)
	}
	if isExpired(err) || isTooLargeRV(err) {
		m.relist(now, err)
		return nil
	}
	return m.fail(now, opWatch, err)
}

// streamFailed handles any failure of a streaming list: retry from the
// latest state, fall back to a paginated LIST, or back off and retry.
func (m *machine[T]) streamFailed(now time.Time, err error) error {
	m.open = false
	m.begun = false
	if (isExpired(err) || isTooLargeRV(err)) && !m.rvGone && m.lastRV != "" {
		m.log.Info("streaming list resourceVersion unavailable, streaming the latest state", "rv", m.lastRV, "err", err)
		m.rvGone = true
		m.plan()
		return nil
	}
	if m.cfg.mode == InitialListAuto && !isTransient(err) {
		if isStreamingRejected(err) {
			m.streamOff = true
		}
		m.log.Info("streaming list failed, falling back to a paginated list", "err", err, "permanent", m.streamOff)
		m.startList()
		m.plan()
		return nil
	}
	return m.fail(now, opWatchList, err)
}

// received takes one event of the open watch.
func (m *machine[T]) received(now time.Time, ev apiwatch.Event) ([]Event[T], error) {
	m.now = now
	m.watchEvents++
	if m.phase == phaseStream {
		return m.receivedInitial(now, ev)
	}
	switch ev.Type {
	case apiwatch.Added, apiwatch.Modified, apiwatch.Deleted:
		obj, ok := ev.Object.(T)
		if !ok {
			return nil, m.report(opWatch, unexpected(ev))
		}
		rv := obj.GetResourceVersion()
		if rv != "" {
			m.lastRV = rv
		}
		t := Added
		switch ev.Type {
		case apiwatch.Modified:
			t = Modified
		case apiwatch.Deleted:
			t = Deleted
		}
		m.out[0] = Event[T]{Type: t, Object: obj, ResourceVersion: rv}
		m.plan() // the time left to the watch's deadline
		return m.out[:1], nil
	case apiwatch.Bookmark:
		meta, ok := ev.Object.(metav1.Object)
		if !ok {
			return nil, m.report(opWatch, unexpected(ev))
		}
		rv := meta.GetResourceVersion()
		if rv == "" {
			m.plan()
			return nil, nil
		}
		m.lastRV = rv
		m.out[0] = Event[T]{Type: Bookmark, ResourceVersion: rv}
		m.plan()
		return m.out[:1], nil
	case apiwatch.Error:
		m.open = false
		err := apierrors.FromObject(ev.Object)
		switch {
		case isExpired(err) || isTooLargeRV(err):
			m.relist(now, err)
			return nil, nil
		case apierrors.IsTooManyRequests(err), isStreamBroken(err):
			// Slow down, or the connection broke: the resourceVersion is
			// still good, watch on from it after the delay.
			return nil, m.fail(now, opWatch, err)
		}
		return nil, m.relistFailed(now, err)
	}
	return nil, m.report(opWatch, unexpected(ev))
}

// receivedInitial takes one event of a streaming list before its end.
func (m *machine[T]) receivedInitial(now time.Time, ev apiwatch.Event) ([]Event[T], error) {
	switch ev.Type {
	case apiwatch.Added:
		obj, ok := ev.Object.(T)
		if !ok {
			return nil, m.report(opWatchList, unexpected(ev))
		}
		evs := append(m.begin(m.out[:0]), Event[T]{Type: RelistItem, Object: obj, ResourceVersion: obj.GetResourceVersion()})
		return evs, nil
	case apiwatch.Bookmark:
		meta, ok := ev.Object.(metav1.Object)
		if !ok {
			return nil, m.report(opWatchList, unexpected(ev))
		}
		if meta.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
			return nil, nil // progress only; the snapshot is not complete yet
		}
		rv := meta.GetResourceVersion()
		if rv == "" {
			return nil, m.streamFailed(now, ErrNoResourceVersion)
		}
		return m.finish(m.out[:0], rv), nil
	case apiwatch.Modified, apiwatch.Deleted:
		// A server that streams the initial state sends only ADDED before
		// the end bookmark; this one ignored sendInitialEvents.
		return nil, m.streamFailed(now, fmt.Errorf("%w: got %s before it", ErrInitialEventsEndMissing, ev.Type))
	case apiwatch.Error:
		return nil, m.streamFailed(now, apierrors.FromObject(ev.Object))
	}
	return nil, m.report(opWatchList, unexpected(ev))
}

// closed: the open watch's channel closed.
func (m *machine[T]) closed(now time.Time) error {
	m.now = now
	m.open = false
	if m.phase == phaseStream {
		return m.streamFailed(now, fmt.Errorf("%w: the stream closed", ErrInitialEventsEndMissing))
	}
	if m.watchEvents == 0 && now.Sub(m.watchStart) < watchMinLife {
		return m.fail(now, opWatch, ErrWatchClosedEarly)
	}
	m.plan() // watch again from lastRV
	return nil
}

func unexpected(ev apiwatch.Event) error {
	return fmt.Errorf("%w: %T in a %s event", ErrUnexpectedObject, ev.Object, ev.Type)
}
