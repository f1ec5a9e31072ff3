package manager_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/manager"
)

const helperEnv = "KLOOP_MANAGER_TEST_HELPER"

// signalHelper is the main of the re-executed test binary: a manager with
// one controller whose single reconcile is slow ("finish") or never ends
// ("hang"). It prints what happens on stdout and returns the exit code.
func signalHelper() int {
	mode := os.Getenv(helperEnv)
	ctx, stop := manager.SignalContext(context.Background())
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rec := controller.ReconcilerFunc[string](func(rctx context.Context, key string) (controller.Result, error) {
		fmt.Println("reconcile started")
		if mode == "hang" {
			<-ctx.Done()
			fmt.Println("stop requested")
			select {} // ignores its context: only a second signal ends this
		}
		// A slow reconcile that is let finish: still running when the
		// signal stops the manager, which must wait for it.
		<-ctx.Done()
		fmt.Println("reconcile finished, ctx err:", rctx.Err())
		return controller.Result{}, nil
	})
	reg := prometheus.NewRegistry()
	c, err := controller.New(rec, controller.Options[string]{Name: "slow", Registerer: reg, Logger: log})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	m, err := manager.New(manager.Options{MetricsAddr: "127.0.0.1:0", HealthAddr: "127.0.0.1:0", Gatherer: reg, Logger: log})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	if err := m.Add(c); err != nil {
		fmt.Println(err)
		return 2
	}
	c.Enqueue("only")
	if err := m.Start(ctx); err != nil {
		fmt.Println("manager:", err)
		return 3 // distinct from the second signal's exit status 1
	}
	fmt.Println("manager stopped cleanly")
	return 0
}

// runHelper starts the test binary as a helper in mode and returns its
// stdout lines as they come.
func runHelper(t *testing.T, mode string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, lines
}

func waitLine(t *testing.T, lines <-chan string, prefix string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("helper exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("helper did not print %q within 30s", prefix)
		}
	}
}

func TestSignalContext_SIGTERMLetsSlowReconcileFinishThenExitsZero(t *testing.T) {
	cmd, lines := runHelper(t, "finish")
	waitLine(t, lines, "reconcile started")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	err := cmd.Wait()
	want := []string{"reconcile finished, ctx err: <nil>", "manager stopped cleanly"}
	if strings.Join(rest, "\n") != strings.Join(want, "\n") {
		t.Errorf("after SIGTERM the helper printed %q, want %q", rest, want)
	}
	if err != nil {
		t.Errorf("helper exited with %v, want status 0", err)
	}
}

func TestSignalContext_SecondSignalExitsOne(t *testing.T) {
	cmd, lines := runHelper(t, "hang")
	waitLine(t, lines, "reconcile started")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The first signal starts a stop that cannot finish; the second must
	// end the process. It is sent once the first has been handled: two
	// signals sent at once may reach the process as one.
	waitLine(t, lines, "stop requested")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	err := testwait.Receive(t, "the helper to exit after the second SIGTERM", done)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("helper ended with %v, want exit status 1", err)
	}
}

func TestSignalContext_StopReleasesWithoutSignal(t *testing.T) {
	ctx, stop := manager.SignalContext(context.Background())
	stop()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("context not cancelled by stop")
	}
	if errors.Is(context.Cause(ctx), manager.ErrSignal) {
		t.Error("cause is ErrSignal without a signal")
	}
	stop() // idempotent
}
