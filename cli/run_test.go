package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop/cli"
)

// command is a controller-like command whose RunE returns runErr after
// setting up the logs, and records the --kubeconfig and --master it saw.
func command(runErr error, seen *[2]string) *cobra.Command {
	f := cli.NewFlags("democtl")
	cmd := &cobra.Command{
		Use: "democtl",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.Validate(); err != nil {
				return err
			}
			if _, err := f.Logging.Setup(cmd); err != nil {
				return err
			}
			if seen != nil {
				*seen = [2]string{f.Cluster.Kubeconfig, f.Cluster.Master}
			}
			return runErr
		},
	}
	f.AddFlags(cmd.Flags())
	return cmd
}

func TestRun_ExitCodesAndMessages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		runErr     error
		args       []string
		code       int
		wantStdout string
		wantStderr []string
	}{
		{name: "success", code: 0},
		{name: "help goes to stdout", args: []string{"--help"}, code: 0, wantStdout: "--kube-api-qps"},
		{name: "version", args: []string{"version"}, code: 0, wantStdout: "democtl "},
		{name: "an unknown flag", args: []string{"--nope"}, code: 2,
			wantStderr: []string{"democtl: unknown flag: --nope", "Run 'democtl --help' for usage."}},
		{name: "a value pflag cannot parse", args: []string{"--kube-api-burst", "many"}, code: 2,
			wantStderr: []string{`invalid argument "many" for "--kube-api-burst"`}},
		{name: "an unexpected argument", args: []string{"extra"}, code: 2,
			wantStderr: []string{`unknown command "extra" for "democtl"`}},
		{name: "a bad value, found by the command", args: []string{"--log-level", "loud"}, code: 2,
			wantStderr: []string{`democtl: --log-level "loud": want debug`, "--help"}},
		{name: "a usage error from the command", runErr: cli.Usagef("--a and --b exclude each other"), code: 2,
			wantStderr: []string{"democtl: --a and --b exclude each other"}},
		{name: "a failure is logged through the command's logger", runErr: errors.New("lost the API server"), code: 1,
			wantStderr: []string{`level=ERROR msg="Exiting on error" err="lost the API server"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := cli.Run(context.Background(), command(tc.runErr, nil), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantStdout, stdout.String())
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestRun_FailureLogIsJSONWithLogFormatJSON(t *testing.T) {
	var stderr strings.Builder
	code := cli.Run(context.Background(), command(errors.New("boom"), nil), []string{"--log-format", "json"}, new(strings.Builder), &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(stderr.String()), &line); err != nil {
		t.Fatalf("stderr is not one JSON object: %v\n%s", err, stderr.String())
	}
	if line["level"] != "ERROR" || line["err"] != "boom" {
		t.Errorf("log line %v, want level ERROR and err boom", line)
	}
}

func TestRun_SampleControllersSingleDashFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want [2]string
	}{
		{[]string{"-kubeconfig", "/k", "-master", "https://m"}, [2]string{"/k", "https://m"}},
		{[]string{"-kubeconfig=/k", "-master=https://m"}, [2]string{"/k", "https://m"}},
		{[]string{"--kubeconfig", "/k", "--master=https://m"}, [2]string{"/k", "https://m"}},
	} {
		var seen [2]string
		if code := cli.Run(context.Background(), command(nil, &seen), tc.args, new(strings.Builder), new(strings.Builder)); code != 0 {
			t.Errorf("%q: exit %d", tc.args, code)
		}
		if seen != tc.want {
			t.Errorf("%q: kubeconfig and master %q, want %q", tc.args, seen, tc.want)
		}
	}
	// Only the known names: pflag still refuses other single-dash words.
	var stderr strings.Builder
	if code := cli.Run(context.Background(), command(nil, nil), []string{"-context", "x"}, new(strings.Builder), &stderr); code != 2 {
		t.Errorf("-context: exit %d, want 2", code)
	}
	// After "--" nothing is rewritten.
	if code := cli.Run(context.Background(), command(nil, nil), []string{"--", "-master"}, new(strings.Builder), &stderr); code != 2 {
		t.Errorf("-- -master: exit %d, want 2 (an argument)", code)
	}
}

func TestRun_SubcommandsKeepTheirOwnFlagsAndGetVersion(t *testing.T) {
	var got string
	root := &cobra.Command{Use: "tool"}
	sub := &cobra.Command{Use: "sub", RunE: func(cmd *cobra.Command, _ []string) error { return nil }}
	sub.Flags().StringVar(&got, "own", "", "")
	root.AddCommand(sub)
	var stdout, stderr strings.Builder
	if code := cli.Run(context.Background(), root, []string{"sub", "--own", "x"}, &stdout, &stderr); code != 0 || got != "x" {
		t.Errorf("sub --own x: exit %d, --own %q; stderr %s", code, got, stderr.String())
	}
	if code := cli.Run(context.Background(), root, []string{"version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "tool ") {
		t.Errorf("version: exit %d, stdout %q", code, stdout.String())
	}
	stderr.Reset()
	if code := cli.Run(context.Background(), root, []string{"bogus"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown command "bogus" for "tool"`) {
		t.Errorf("bogus: exit %d, stderr %q; want 2 naming the command", code, stderr.String())
	}
}

func TestRun_CommandSeesTheContext(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	var seen any
	root := &cobra.Command{Use: "tool", RunE: func(cmd *cobra.Command, _ []string) error { seen = cmd.Context().Value(key{}); return nil }}
	if code := cli.Run(ctx, root, nil, new(strings.Builder), new(strings.Builder)); code != 0 || seen != "v" {
		t.Errorf("exit %d, context value %v; want 0 and the caller's context", code, seen)
	}
}
