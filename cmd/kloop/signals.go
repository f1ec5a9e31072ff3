package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kloop-dev/kloop/testenv"
)

// interrupts turns the first SIGINT or SIGTERM into the cancellation of its
// context, for a graceful stop. A second one does not wait for that stop:
// it kills the control plane's processes, removes its temporary directory
// and exits 1, so that an impatient Ctrl-C leaves no etcd data or
// certificates behind. (The processes would die with this one anyway; the
// directory would not go.)
type interrupts struct {
	sigs   chan os.Signal
	quit   chan struct{}
	wg     sync.WaitGroup
	stderr io.Writer

	mu      sync.Mutex
	pids    []int  // process group leaders to kill
	tempDir string // to remove; "" for a --data-dir
}

// notifyInterrupts starts watching for SIGINT and SIGTERM; the context is
// cancelled on the first. Call stop when done.
func notifyInterrupts(stderr io.Writer) (context.Context, *interrupts) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &interrupts{sigs: make(chan os.Signal, 2), quit: make(chan struct{}), stderr: stderr}
	signal.Notify(in.sigs, os.Interrupt, syscall.SIGTERM)
	in.wg.Go(func() {
		defer cancel()
		select {
		case <-in.sigs:
			cancel()
		case <-in.quit:
			return
		}
		select {
		case s := <-in.sigs:
			in.abort(s)
		case <-in.quit:
		}
	})
	return ctx, in
}

// controlPlane tells what a second signal has to clean up: env's processes
// and, when temporary, its directory.
func (in *interrupts) controlPlane(env *testenv.Env, temporary bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, pid := range env.PIDs() {
		in.pids = append(in.pids, pid)
	}
	if temporary {
		in.tempDir = env.Dir
	}
}

// forget drops what controlPlane recorded, once the control plane has
// stopped.
func (in *interrupts) forget() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pids, in.tempDir = nil, ""
}

// abort kills the processes, removes the directory and exits 1.
func (in *interrupts) abort(s os.Signal) {
	in.mu.Lock()
	defer in.mu.Unlock()
	fmt.Fprintf(in.stderr, "kloop: second %v: killing the control plane\n", s)
	for _, pid := range in.pids {
		// Each child leads a process group of its own.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if in.tempDir != "" {
		// A process being killed may still create a file for a moment.
		var err error
		for range 20 {
			if err = os.RemoveAll(in.tempDir); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintf(in.stderr, "kloop: %v\n", err)
		}
	}
	os.Exit(1)
}

// stop stops watching the signals.
func (in *interrupts) stop() {
	signal.Stop(in.sigs)
	close(in.quit)
	in.wg.Wait()
}
