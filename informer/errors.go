package informer

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var (
	// ErrAlreadyStarted is returned by Start when the informer has been started
	// before; an informer runs once.
	ErrAlreadyStarted = errors.New("informer: already started")
	// ErrStopped is returned by AddHandler after Start has returned, and is
	// why a SyncError's wait ended when the informer stopped unsynced.
	ErrStopped = errors.New("informer: stopped")
	// ErrTransformSet is returned by SetTransform when the informer
	// already has a transform.
	ErrTransformSet = errors.New("informer: transform already set")
	// ErrNotStarted is the cause a SyncError gives when nothing ran the
	// informer while WaitForSync waited.
	ErrNotStarted = errors.New("informer: not started")
	// ErrRefused is why a SyncError's wait ended when the API server
	// refused the informer's list or watch (403 Forbidden): waiting longer
	// would not help until someone grants the permission.
	ErrRefused = errors.New("informer: refused by the API server")
)

// refused reports whether err says that the API server will not serve the
// informer: 403 Forbidden.
func refused(err error) bool { return apierrors.IsForbidden(err) }

// SyncError says that an informer (or one handler's registration) did not
// sync before the caller stopped waiting, and why.
//
// It wraps Err, the informer's last list/watch error, so that
// apierrors.IsForbidden(err), apierrors.IsNotFound(err) and errors.As work
// on it, and Waited, the reason waiting ended (context.Cause of the
// caller's ctx), so that errors.Is(err, context.DeadlineExceeded) works too.
type SyncError struct {
	// Informer describes the informer: its resource, namespace and
	// selectors.
	Informer string
	// Err is the last error of the informer's list/watch, or
	// ErrNotStarted, or nil when it had none (a slow but healthy sync).
	Err error
	// Waited is why the caller stopped waiting: context.Cause of its
	// context, or ErrStopped when the informer stopped first.
	Waited error
}

func (e *SyncError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("informer %s did not sync: %v (stopped waiting: %v)", e.Informer, e.Err, e.Waited)
	default:
		return fmt.Sprintf("informer %s did not sync: no list/watch error yet, still syncing (stopped waiting: %v)", e.Informer, e.Waited)
	}
}

// Unwrap returns the causes, for errors.Is and errors.As.
func (e *SyncError) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Waited != nil {
		errs = append(errs, e.Waited)
	}
	return errs
}
