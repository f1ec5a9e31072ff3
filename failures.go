package kloop

import (
	"context"
	"errors"
	"strings"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/record"
	"github.com/kloop-dev/kloop/watcher"
)

// ReasonReconcileFailed is the reason of the Warning event a controller
// of NewController records on its For object when a reconcile fails,
// unless the error names its own reason (see NewController).
const ReasonReconcileFailed = "ReconcileFailed"

// recordFailures wraps reconcile so that each of its errors is recorded as
// a Warning event on the object at the key, read from the For kind's cache
// (an object gone from it gets none). Repeats of one message add to one
// Event's series (record.Recorder), and a failing key's retries are as
// far apart as the controller's back-off, so a failing object's events
// cost one write per batch of retries, not one per retry.
func recordFailures(r *record.Recorder, obj func(cache.Key) (watcher.Object, bool),
	reconcile func(context.Context, cache.Key) (controller.Result, error)) func(context.Context, cache.Key) (controller.Result, error) {
	return func(ctx context.Context, key cache.Key) (controller.Result, error) {
		res, err := reconcile(ctx, key)
		if err == nil || r == nil || errors.Is(context.Cause(ctx), context.Canceled) {
			return res, err // a stop's cancelled reconcile is no failure of the object's
		}
		var done recorded
		if o, ok := obj(key); ok && !errors.As(err, &done) {
			reason, msg := failureEvent(err)
			r.Event(o, record.Warning, reason, msg)
		}
		return res, err
	}
}

// failureEvent returns the reason and message of a failed reconcile's
// event: the reason of the outermost error in err's chain with an
// EventReason() string method, and that error's text, else
// ReasonReconcileFailed and err's text, without TerminalError's prefix.
func failureEvent(err error) (reason, message string) {
	var named interface{ EventReason() string }
	if errors.As(err, &named) && named.EventReason() != "" {
		err = named.(error)
		reason = named.EventReason()
	} else {
		reason = ReasonReconcileFailed
	}
	return reason, strings.TrimPrefix(err.Error(), controller.ErrTerminal.Error()+": ")
}

// recorded is an error whose Warning event is recorded already (Finalize
// records its own), so that the controller does not record another.
type recorded struct{ error }

func (e recorded) Unwrap() error { return e.error }
