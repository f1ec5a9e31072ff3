// Package reexec lets a test run the program under test as a real process:
// the test starts its own test binary again with a marker in the
// environment, and TestMain hands that process to the program's body instead
// of running tests. The process is real (its own pid, signals, exit code,
// stdout), and no separate build step is needed.
package reexec

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"testing"
)

// envVar marks a re-executed test binary.
const envVar = "KLOOP_TEST_REEXEC"

// Main must be called first in TestMain. When this process was started by
// Command, it runs body with the arguments given to Command and exits with
// the code body returns; otherwise it returns at once.
//
// It parses the test flags Command passed (-test.short, when the test runs
// with -short), so that testenv refuses to start a control plane in the
// program too when the test tier is the short one.
func Main(body func(args []string) int) {
	if os.Getenv(envVar) == "" {
		return
	}
	flag.Parse()
	args := os.Args[1:]
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(body(args))
}

// Command returns a command that runs this test binary as the program under
// test with args (no tests run in it), with -test.short if this test runs
// with -short. Its environment is this process's plus the marker; append to
// cmd.Env for more.
func Command(ctx context.Context, args ...string) *exec.Cmd {
	testFlags := []string{"-test.run=^$"}
	if testing.Short() {
		testFlags = append(testFlags, "-test.short")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], append(append(testFlags, "--"), args...)...)
	cmd.Env = append(os.Environ(), envVar+"=1")
	return cmd
}
