package controller

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reconciler brings the world in line with the desired state of the object
// named by key. It is level-based: it is told which object to look at, never
// what changed, so it reads the current state (usually from a cache) and acts
// on that. Several events for one key may be folded into one call, and a call
// may find the object already gone.
//
// The controller never runs two Reconcile calls for the same key at once.
// Calls for different keys run concurrently when Options.Workers > 1.
//
// What happens next depends on the return values:
//   - nil error, zero Result: done until something triggers the key again.
//   - nil error, Result.RequeueAfter > 0: reconcile the key again after that
//     long (the key's failure back-off is reset).
//   - nil error, Result.Requeue (RequeueAfter 0): reconcile the key again
//     at once, behind the keys already waiting; not a failure, no back-off
//     (the key's failure back-off is reset).
//   - an error: retry with the rate limiter's growing delay; RequeueAfter
//     and Requeue are ignored (and a warning logged when one is set).
//   - an error wrapped by TerminalError, or one the API server says cannot
//     succeed however often it is sent (Invalid or BadRequest, a denial by
//     an admission webhook or policy, a field-ownership conflict on apply)
//     unless wrapped by Retry:
//     logged and counted, not retried until the key is triggered again.
type Reconciler[K comparable] interface {
	Reconcile(ctx context.Context, key K) (Result, error)
}

// ReconcilerFunc adapts a function to a Reconciler.
type ReconcilerFunc[K comparable] func(ctx context.Context, key K) (Result, error)

// Reconcile calls f(ctx, key).
func (f ReconcilerFunc[K]) Reconcile(ctx context.Context, key K) (Result, error) {
	return f(ctx, key)
}

var _ Reconciler[string] = ReconcilerFunc[string](nil)

// Result tells the controller when to look at a key again after a
// successful Reconcile.
type Result struct {
	// RequeueAfter, when positive, reconciles the key again once this much
	// time has passed, even if nothing changes. It is ignored when Reconcile
	// returns an error: errors are retried with the rate limiter's delay.
	RequeueAfter time.Duration

	// Requeue, with RequeueAfter 0, reconciles the key again as soon as a
	// worker takes it from the queue, behind the keys already waiting: for
	// a reconcile that did one step of several and wants the next at once.
	// It is not a failure: no back-off, no error counted (the result label
	// is "requeue"). A reconcile that returns it every time runs without
	// pause; to look again later use RequeueAfter. It is ignored when
	// RequeueAfter is set or Reconcile returns an error.
	//
	// controller-runtime's Requeue: true waits the rate limiter's growing
	// delay instead; kloop keeps back-off for errors.
	Requeue bool
}

// ErrTerminal matches every error made by TerminalError:
// errors.Is(err, ErrTerminal) reports whether err will not be retried.
var ErrTerminal = errors.New("terminal error")

// TerminalError marks err as one that retrying cannot fix (an invalid spec,
// say). The controller logs it and counts it in
// controller_runtime_terminal_reconcile_errors_total, but does not retry
// the key until something triggers it again. errors.Is(result, ErrTerminal)
// and errors.Is(result, err) are both true. TerminalError(nil) is still a
// terminal error.
func TerminalError(err error) error {
	return &terminalError{err: err}
}

type terminalError struct{ err error }

func (e *terminalError) Error() string {
	if e.err == nil {
		return ErrTerminal.Error()
	}
	return fmt.Sprintf("%s: %v", ErrTerminal.Error(), e.err)
}

func (e *terminalError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrTerminal}
	}
	return []error{ErrTerminal, e.err}
}

// panicError is the error a Reconcile call that panicked is turned into.
// It is retried like any other error and counted in
// controller_runtime_reconcile_panics_total.
type panicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("reconcile panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *panicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
