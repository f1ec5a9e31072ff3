package watcher

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Sentinel errors. They reach LastError and Config.OnError wrapped in an
// *OpError; test for them with errors.Is.
var (
	// ErrNoResourceVersion: a LIST response or the bookmark that ends a
	// streaming list carried no resourceVersion, so there is nothing to watch
	// from. The reflector backs off and lists again.
	ErrNoResourceVersion = errors.New("watch: response has no resourceVersion")

	// ErrWatchClosedEarly: a watch ended within a second of opening without
	// delivering a single event. Treated as a failure (with backoff) so that
	// a server or proxy that closes watches at once cannot cause a hot loop.
	ErrWatchClosedEarly = errors.New("watch: watch closed at once without events")

	// ErrInitialEventsEndMissing: a streaming list (watch-list) ended, went
	// silent or sent a change event before the bookmark annotated
	// "k8s.io/initial-events-end". In InitialListAuto mode the reflector
	// falls back to a paginated LIST; in InitialListStreaming mode it backs
	// off and tries again.
	ErrInitialEventsEndMissing = errors.New("watch: streaming list did not end with the initial-events-end bookmark")

	// ErrUnexpectedObject: a watch event carried an object that is not of the
	// reflector's type (or an event type outside the watch protocol). The
	// event is skipped; the error is reported so that it is not silent.
	ErrUnexpectedObject = errors.New("watch: unexpected object in watch stream")

	// ErrAlreadyRunning: Run was called on a reflector that is running.
	ErrAlreadyRunning = errors.New("watch: reflector is already running")
)

// Op names the call that failed.
type Op string

const (
	// OpList is a paginated LIST call.
	OpList Op = "list"
	// OpWatchList is a streaming list: a WATCH with sendInitialEvents=true.
	OpWatchList Op = "watch-list"
	// OpWatch is a plain WATCH resumed from a resourceVersion.
	OpWatch Op = "watch"
)

// OpError is the error the reflector reports (through LastError and
// Config.OnError) when a list or watch fails. Err is the error returned by the
// ListerWatcher, or the status carried by a watch error event, or one of this
// package's sentinels; errors.Is and errors.As see through OpError, so
// apierrors.IsForbidden(err) and apierrors.IsNotFound(err) work on it.
type OpError struct {
	Op       Op
	Resource string // Config.Name of the reflector
	Err      error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Op, e.Resource, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// isExpired reports whether err says that the resourceVersion (or continue
// token) asked for is no longer available: 410 Gone / reason Expired.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeRV reports whether the server has not yet seen the
// resourceVersion asked for (its cache lags behind, or the store was
// restored from an older backup).
func isTooLargeRV(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// isTransient reports errors after which the same request should simply be
// retried after a backoff: the server is not there or asks us to slow down.
func isTransient(err error) bool {
	return utilnet.IsConnectionRefused(err) ||
		apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) ||
		apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err)
}

// isStreamingRejected reports errors that mean "this server (or this
// resource) does not accept a streaming list request", as opposed to an error
// any request would get. After one of these the reflector stops trying
// streaming lists (in InitialListAuto mode) for the rest of its life.
func isStreamingRejected(err error) bool {
	return apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) ||
		apierrors.IsNotAcceptable(err)
}
