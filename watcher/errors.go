package watcher

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Sentinel errors. They reach LastError and Options.OnError wrapped in an
// *opError; test for them with errors.Is.
var (
	// ErrNoResourceVersion: a LIST response or the bookmark that ends a
	// streaming list carried no resourceVersion, so there is nothing to watch
	// from. The reflector backs off and lists again.
	ErrNoResourceVersion = errors.New("watch: response has no resourceVersion")

	// ErrWatchClosedEarly: a watch ended within a second of opening without
	// delivering a single event. Treated as a failure (with backoff) so that
	// a server or proxy that closes watches at once cannot cause a hot loop.
	ErrWatchClosedEarly = errors.New("watch: watch closed at once without events")

	// ErrWatchOverdue: a watch was still open 30s after the timeout it was
	// opened with, which the server would have ended it at: the connection
	// under it is presumed dead. The reflector stops it, backs off and
	// watches again from the same resourceVersion.
	ErrWatchOverdue = errors.New("watch: watch outlived its timeout")

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

// opName names the call that failed.
type opName string

const (
	// opList is a paginated LIST call.
	opList opName = "list"
	// opWatchList is a streaming list: a WATCH with sendInitialEvents=true.
	opWatchList opName = "watch-list"
	// opWatch is a plain WATCH resumed from a resourceVersion.
	opWatch opName = "watch"
)

// opError is the error the reflector reports (through LastError and
// Options.OnError) when a list or watch fails. Err is the error returned by the
// ListerWatcher, or the status carried by a watch error event, or one of this
// package's sentinels; errors.Is and errors.As see through opError, so
// apierrors.IsForbidden(err) and apierrors.IsNotFound(err) work on it.
type opError struct {
	Op       opName
	Resource string // Options.Name of the reflector
	Err      error
}

func (e *opError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Op, e.Resource, e.Err)
}

func (e *opError) Unwrap() error { return e.Err }

// isExpired reports whether err says that the resourceVersion (or continue
// token) asked for is no longer available: 410 Gone / reason Expired.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeRV reports whether the server has not yet seen the
// resourceVersion asked for (its cache lags behind, or the store was
// restored from an older backup). Servers have said so in three ways: since
// 1.18.6 with the status cause ResourceVersionTooLarge; from 1.17.0 to
// 1.18.5 with a 504 Timeout whose cause message is "Too large resource
// version"; before that with a 504 Timeout whose message contains it. The
// older two look like timeouts, which are otherwise retried as they are.
func isTooLargeRV(err error) bool {
	if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		return true
	}
	if !apierrors.IsTimeout(err) {
		return false
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	s := st.Status()
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if strings.EqualFold(c.Message, tooLargeRVMessage) {
				return true
			}
		}
	}
	return strings.Contains(strings.ToLower(s.Message), strings.ToLower(tooLargeRVMessage))
}

const tooLargeRVMessage = "Too large resource version"

// isStreamBroken reports a watch error event that the client made itself
// because it could not read the stream any further (the connection broke,
// an HTTP/2 health ping went unanswered, the bytes did not decode): client-go
// reports those as a 500 whose cause is UnexpectedServerResponse. The
// server said nothing about the resourceVersion, so the watch is resumed
// from it.
func isStreamBroken(err error) bool {
	return apierrors.IsInternalError(err) && apierrors.HasStatusCause(err, metav1.CauseTypeUnexpectedServerResponse)
}

// retryAfter is the delay the server asked for (Retry-After, or a status's
// retryAfterSeconds), 0 if none.
func retryAfter(err error) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
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
