package kloopfake

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kloop-dev/kloop"
)

// Start runs app's informers and event recorder, but not its controllers,
// until ctx is done, and returns once every informer has synced: a test
// then calls a reconcile function itself, on a full cache, and nothing
// else reconciles meanwhile. Handles made after Start start their
// informer at once; wait for it with app.Factory().WaitForSync.
//
// stop cancels them and returns once they have stopped, with their
// error. Start fails, starting nothing, when a declaration of app failed
// (app.Err), and when an informer does not sync, after stopping what it
// started.
//
// app may be on any API server, not only a Server: on a real one (testenv's
// etcd and kube-apiserver) Start is the same way to call one reconcile by
// hand, with nothing else reconciling (ExampleStart_controlPlane). A write
// the App did not make reaches its cache a moment later; wait for it with
// the handle's Informer().Lister().WaitFor and the write's resourceVersion
// (ExampleStart_waitForAWrite).
//
// To run the controllers too, call app.Run instead, as a program does.
func Start(ctx context.Context, app *kloop.App) (stop func() error, err error) {
	if err := app.Err(); err != nil {
		return nil, fmt.Errorf("kloopfake.Start: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	run := func(start func(context.Context) error) {
		wg.Go(func() {
			if err := start(ctx); err != nil && !errors.Is(err, context.Canceled) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	run(app.Factory().Start)
	run(app.Recorder().Start)
	stop = func() error {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(errs...)
	}
	if err := app.Factory().WaitForSync(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("kloopfake.Start: %w", err), stop())
	}
	return stop, nil
}
