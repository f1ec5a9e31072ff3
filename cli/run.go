package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop/manager"
)

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed
	ExitUsage = 2 // bad flags or arguments: the command did not run
)

// Main runs root as the whole program: under manager.SignalContext (the
// first SIGINT or SIGTERM cancels the context, a second exits 1 at once),
// with os.Args, os.Stdout and os.Stderr, and exits with Run's code.
func Main(root *cobra.Command) {
	ctx, stop := manager.SignalContext(context.Background())
	code := Run(ctx, root, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs root with args and returns the exit code. Before it executes
// root it
//   - adds a "version" subcommand, unless root has one;
//   - makes every runnable command without an Args check take no
//     arguments;
//   - rewrites sample-controller's single-dash -kubeconfig and -master
//     (with or without =value) to their double-dash form, before a "--";
//   - silences cobra's own error and usage printing.
//
// An error before a command's RunE starts (an unknown flag or command, a
// bad argument, a flag pflag cannot parse) and a *FlagError or an error of
// Usagef from RunE are printed with a pointer to --help, and Run returns
// ExitUsage. An ExitCode returns its value and prints nothing. Any other
// error from RunE returns ExitError; it is logged through the logger of
// Logging.Setup if the command made one, else printed as
// "<command>: <error>". cobra writes --help to stdout.
func Run(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	s := &state{}
	prepare(root)
	// cobra hands a subcommand the root's context only when it has none,
	// so a context from an earlier Run of the same tree would stick.
	forEach(root, func(c *cobra.Command) { c.SetContext(nil) })
	root.SetArgs(singleDash(args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteContextC(context.WithValue(ctx, stateKey{}, s))
	if err == nil {
		return ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	var code ExitCode
	if errors.As(err, &code) {
		return int(code)
	}
	if !s.ran || isUsage(err) {
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
		return ExitUsage
	}
	if s.logger != nil {
		s.logger.Error("Exiting on error", "err", err)
	} else {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	}
	return ExitError
}

// state is what Run learns while root executes.
type state struct {
	ran    bool         // a RunE (or Run) started
	logger *slog.Logger // from Logging.Setup
}

type stateKey struct{}

func stateOf(cmd *cobra.Command) *state {
	ctx := cmd.Context()
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(stateKey{}).(*state)
	return s
}

// prepared marks a command tree prepare has seen.
const prepared = "kloop.dev/cli-prepared"

func prepare(root *cobra.Command) {
	if root.Annotations[prepared] != "" {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[prepared] = "true"
	hasVersion := false
	for _, c := range root.Commands() {
		if c.Name() == "version" {
			hasVersion = true
		}
	}
	if !hasVersion {
		root.AddCommand(versionCommand())
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	forEach(root, markRun)
}

// forEach calls fn on c and every command under it.
func forEach(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		forEach(sub, fn)
	}
}

// markRun makes c's RunE (or Run) record that it started, and gives a
// runnable c without an Args check cobra.NoArgs.
func markRun(c *cobra.Command) {
	if c.Args == nil && c.Runnable() {
		c.Args = cobra.NoArgs
	}
	switch {
	case c.RunE != nil:
		runE := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if s := stateOf(cmd); s != nil {
				s.ran = true
			}
			return runE(cmd, args)
		}
	case c.Run != nil:
		run := c.Run
		c.Run = func(cmd *cobra.Command, args []string) {
			if s := stateOf(cmd); s != nil {
				s.ran = true
			}
			run(cmd, args)
		}
	}
}

// singleDashNames are the flags sample-controller and client-go's
// workqueue example spell with one dash (Go's flag package).
var singleDashNames = []string{"kubeconfig", "master"}

// singleDash rewrites -kubeconfig, -kubeconfig=X, -master and -master=X to
// their double-dash form, up to a "--".
func singleDash(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		for _, name := range singleDashNames {
			if a == "-"+name || strings.HasPrefix(a, "-"+name+"=") {
				out[i] = "-" + a
			}
		}
	}
	return out
}
