package manager

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// ErrSignal is the context.Cause of a context SignalContext cancelled.
var ErrSignal = errors.New("manager: received a termination signal")

// exit is os.Exit, replaceable in tests.
var exit = os.Exit

// SignalContext returns a copy of parent that is cancelled, with a cause
// wrapping ErrSignal, on the first SIGINT or SIGTERM. A second signal exits
// the process with status 1 at once, for a stop that hangs. stop releases
// the signals and the goroutine that watches them; call it when done
// (typically deferred in main).
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-sigs:
			cancel(&signalError{s})
		case <-quit:
			return
		}
		select {
		case <-sigs:
			exit(1)
		case <-quit:
		}
	})
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			wg.Wait()
			cancel(context.Canceled)
		})
	}
}

type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "received signal " + e.sig.String() }
func (e *signalError) Unwrap() error { return ErrSignal }
