// Package cmd_test runs every command under cmd/ as the binary a user
// builds, and checks that each follows the command-line conventions of
// package cli: the flags its --help lists, version, --log-format json,
// --metrics-bind-address 0, the kubeconfig loading order and leader
// election.
package cmd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	testenv.DetectMutations()
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

// The link-time version the binaries are built with.
const (
	testVersion   = "v9.9.9-cmdtest"
	testRevision  = "0123456789abcdef0123456789abcdef01234567"
	testBuildTime = "2026-01-02T03:04:05Z"
)

// commands are the packages under cmd/, by binary name.
var commands = []string{"foo-controller", "cronjob-controller", "podwatch", "notifier", "kloop"}

// build builds every command into dir with the link-time version set, as
// an image build without VCS information would.
func build(t *testing.T, dir string) {
	t.Helper()
	ld := fmt.Sprintf("-X github.com/kloop-dev/kloop/cli.version=%s -X github.com/kloop-dev/kloop/cli.revision=%s -X github.com/kloop-dev/kloop/cli.buildTime=%s",
		testVersion, testRevision, testBuildTime)
	args := []string{"build", "-o", dir + string(filepath.Separator), "-ldflags", ld}
	for _, c := range commands {
		args = append(args, "./"+c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCommand(), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestCommands_FollowTheConventions builds the commands once and
// checks each convention on them, one subtest per convention.
func TestCommands_FollowTheConventions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every command (slow); the flag parsing itself is tested in package cli")
	}
	bin := t.TempDir()
	build(t, bin)
	path := func(name string) string { return filepath.Join(bin, name) }

	t.Run("help lists the flags", func(t *testing.T) { testHelp(t, path) })
	t.Run("help value names are one word", func(t *testing.T) { testHelpValueNames(t, path) })
	t.Run("version prints a version and a revision", func(t *testing.T) { testVersionOutput(t, path) })
	t.Run("version reads the VCS stamp of a plain build", testVersionFromVCS)

	t.Run("on a control plane", func(t *testing.T) {
		env := testenv.StartT(t, testenv.Options{})
		installCtx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := manifest.InstallCRD(installCtx, env.Config, foo.CRDYAML); err != nil {
			t.Fatal(err)
		}
		run := func(t *testing.T) *runner { return &runner{t: t, bin: bin, env: env} }
		t.Run("log-format json writes JSON lines", func(t *testing.T) { testJSONLogs(run(t)) })
		t.Run("metrics-bind-address 0 opens no port", func(t *testing.T) { testNoPort(run(t)) })
		t.Run("kubeconfig order", func(t *testing.T) { testKubeconfigOrder(run(t)) })
		t.Run("leader election: one reconciles, the other takes over after SIGKILL", func(t *testing.T) { testLeaderElection(run(t)) })
	})
}

// goCommand returns the go command: on $PATH, else the one that built
// this test.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// The flags each group of package cli adds.
var (
	clusterFlags = []string{"--kubeconfig", "--context", "--master", "--kube-api-qps", "--kube-api-burst"}
	leaderFlags  = []string{"--leader-elect", "--leader-elect-namespace", "--leader-elect-id",
		"--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period"}
	shardFlags = []string{"--shard", "--shard-group", "--shard-key", "--shard-slots", "--shard-namespace",
		"--shard-lease-duration", "--shard-renew-deadline", "--shard-retry-period", "--shard-client-side-only"}
	servingFlags = []string{"--metrics-bind-address", "--health-probe-bind-address", "--metrics-secure", "--metrics-cert-dir"}
	loggingFlags = []string{"--log-level", "--log-format", "-v, --v"}
)

func testHelp(t *testing.T, path func(string) string) {
	for _, tc := range []struct {
		args  []string // of the binary named first
		flags [][]string
	}{
		{[]string{"foo-controller", "--help"}, [][]string{clusterFlags, leaderFlags, shardFlags, servingFlags, loggingFlags, {"--namespace", "--workers"}}},
		{[]string{"cronjob-controller", "--help"}, [][]string{clusterFlags, leaderFlags, shardFlags, servingFlags, loggingFlags,
			{"--namespace", "--workers", "--webhook-bind-address", "--webhook-cert-dir", "--webhook-local"}}},
		{[]string{"podwatch", "--help"}, [][]string{clusterFlags, leaderFlags, shardFlags, servingFlags, loggingFlags, {"--namespace", "--workers"}}},
		{[]string{"notifier", "--help"}, [][]string{clusterFlags, leaderFlags, servingFlags, loggingFlags, {"--config", "--drain-timeout"}}},
		{[]string{"kloop", "dev", "--help"}, [][]string{loggingFlags, {"--data-dir", "--bin-dir", "--no-controller-manager", "--controllers", "--podsim", "--feature-gates"}}},
		{[]string{"kloop", "demo", "--help"}, [][]string{loggingFlags, {"--data-dir", "--bin-dir", "--namespace"}}},
	} {
		out, err := exec.Command(path(tc.args[0]), tc.args[1:]...).Output()
		if err != nil {
			t.Errorf("%s: %v", strings.Join(tc.args, " "), err)
			continue
		}
		for _, group := range tc.flags {
			for _, f := range group {
				if !strings.Contains(string(out), "  "+f+" ") {
					t.Errorf("%s lacks %s:\n%s", strings.Join(tc.args, " "), f, out)
				}
			}
		}
		if tc.args[1] == "--help" && !regexp.MustCompile(`(?m)^\s+version\s+Print the version`).Match(out) {
			t.Errorf("%s does not list the version subcommand:\n%s", strings.Join(tc.args, " "), out)
		}
	}
}

// flagLine is a flag's line in --help: pflag writes the flag, its value
// name and, after at least two spaces, the usage.
var flagLine = regexp.MustCompile(`^\s+(?:-\S, )?(--\S+)(.*?)(?:\s{2,}|$)`)

// subcommandLine is a line of --help's "Available Commands:".
var subcommandLine = regexp.MustCompile(`^  (\S+)\s{2,}\S`)

// testHelpValueNames walks every command and subcommand's --help and
// checks that each flag's value name is a single word: pflag takes the
// first back-quoted words of a usage string as the value name, so a
// quoted phrase there ("build with `make x`") reads as --flag make x.
func testHelpValueNames(t *testing.T, path func(string) string) {
	checked := 0
	var walk func(args []string)
	walk = func(args []string) {
		out, err := exec.Command(path(args[0]), append(args[1:], "--help")...).Output()
		if err != nil {
			t.Errorf("%s --help: %v", strings.Join(args, " "), err)
			return
		}
		inCommands := false
		for line := range strings.Lines(string(out)) {
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
				inCommands = line == "Available Commands:"
				continue
			case inCommands:
				if m := subcommandLine.FindStringSubmatch(line); m != nil && m[1] != "help" && m[1] != "completion" {
					walk(append(slices.Clone(args), m[1]))
				}
				continue
			}
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			checked++
			if value := strings.TrimSpace(m[2]); strings.Contains(value, " ") {
				t.Errorf("%s --help: flag %s has the value name %q, want one word (a back-quoted phrase in its usage?):\n%s", strings.Join(args, " "), m[1], value, line)
			}
		}
	}
	for _, c := range commands {
		walk([]string{c})
	}
	// Every command has flags; finding few means the parsing broke.
	if checked < 10*len(commands) {
		t.Errorf("checked only %d flag lines in the --help of %v; the help format changed?", checked, commands)
	}
}

func testVersionOutput(t *testing.T, path func(string) string) {
	for _, name := range commands {
		out, err := exec.Command(path(name), "version").Output()
		if err != nil {
			t.Errorf("%s version: %v", name, err)
			continue
		}
		want := fmt.Sprintf("%s %s\nrevision: %s\ncommit time: unknown\nbuild time: %s\ngo: %s ", name, testVersion, testRevision, testBuildTime, runtime.Version())
		if !strings.HasPrefix(string(out), want) {
			t.Errorf("%s version printed\n%s\nwant it to start\n%s", name, out, want)
		}
	}
}

// testVersionFromVCS builds podwatch the plain way, with the go command's
// VCS stamp and no link-time values, and checks that version prints the
// checkout's commit. The go command stamps only a checkout whose .git is
// a directory (not a linked worktree), so elsewhere there is nothing to
// check.
func testVersionFromVCS(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(root)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("the checkout's .git is not a directory (a linked worktree): the go command stamps no VCS information")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "podwatch")
	if out, err := exec.Command(goCommand(), "build", "-buildvcs=true", "-o", bin, "./podwatch").CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "revision: " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("version printed\n%s\nwant a line starting %q", out, want)
	}
	if strings.Contains(string(out), "commit time: unknown") {
		t.Errorf("version printed no commit time:\n%s", out)
	}
}

// runner starts the commands against the test's control plane.
type runner struct {
	t   *testing.T
	bin string
	env *testenv.Env
}

// proc is a running command.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *reexec.Lines
}

// start starts the binary name with args and environment env (added to a
// copy of this process's environment without KUBECONFIG and HOME); it is
// killed when the test ends.
func (r *runner) start(name string, env []string, args ...string) *proc {
	r.t.Helper()
	cmd := exec.Command(filepath.Join(r.bin, name), args...)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "KUBECONFIG" && k != "HOME" && k != "KUBERNETES_SERVICE_HOST" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	p := &proc{cmd: cmd}
	p.stdout, p.stderr = reexec.Start(r.t, name, cmd)
	return p
}

// stop sends SIGTERM and waits for the process to exit 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.stdout.WaitEOF(t)
	p.stderr.WaitEOF(t)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("%s after SIGTERM: %v, want exit 0", filepath.Base(p.cmd.Path), err)
	}
}

// end stops the process, if it still runs, and waits for it, whatever its
// exit status: for a process that may have given up by itself.
func (p *proc) end(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.stdout.WaitEOF(t)
	p.stderr.WaitEOF(t)
	_ = p.cmd.Wait()
}

// synced is the log line that says a command talks to its API server and
// its caches are filled.
var synced = map[string]*regexp.Regexp{
	"foo-controller": regexp.MustCompile(`Starting workers`),
	"podwatch":       regexp.MustCompile(`Starting workers`),
	"notifier":       regexp.MustCompile(`Notifier synced`),
}

// controllerCommands are the commands that talk to an API server.
var controllerCommands = []string{"foo-controller", "podwatch", "notifier"}

// args returns the command's own arguments for a run in namespace ns
// (the notifier's config is written into dir).
func (r *runner) args(name, ns, dir string) []string {
	r.t.Helper()
	switch name {
	case "notifier":
		config := filepath.Join(dir, "kubewatch.yaml")
		if err := os.WriteFile(config, []byte("namespace: "+ns+"\nresource: {cm: true}\nhandler: {log: {}}\n"), 0o600); err != nil {
			r.t.Fatal(err)
		}
		// Not kubewatch's :2112 on every interface: tests listen on
		// loopback only, and only when they mean to.
		return []string{"--config", config, "--metrics-bind-address", "0"}
	default:
		return []string{"--namespace", ns}
	}
}

func testJSONLogs(r *runner) {
	t := r.t
	for _, name := range controllerCommands {
		args := append(r.args(name, "default", t.TempDir()), "--kubeconfig", r.env.KubeconfigPath, "--log-format", "json")
		p := r.start(name, nil, args...)
		p.stderr.WaitFor(t, name+"'s synced log", synced[name])
		p.stop(t)
		checkJSONLines(t, name, p.stderr.All())
	}

	// kloop dev: its own control plane, logged as JSON too.
	p := r.start("kloop", nil, "dev", "--no-controller-manager", "--log-format", "json")
	p.stdout.WaitFor(t, "kloop dev's export line", regexp.MustCompile(`^export KUBECONFIG=`))
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.stderr.WaitEOF(t)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("kloop dev after SIGINT: %v", err)
	}
	checkJSONLines(t, "kloop dev", p.stderr.All())
}

// checkJSONLines fails unless lines are JSON objects with a level and a
// message, at least two of them.
func checkJSONLines(t *testing.T, name string, lines []string) {
	t.Helper()
	if len(lines) < 2 {
		t.Errorf("%s wrote %d log lines, want some: %q", name, len(lines), lines)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("%s: log line is not JSON (%v): %s", name, err, l)
			continue
		}
		if _, ok := m["level"]; !ok {
			t.Errorf("%s: JSON log line without a level: %s", name, l)
		}
		if _, ok := m["msg"]; !ok {
			t.Errorf("%s: JSON log line without a msg: %s", name, l)
		}
	}
}

// listening returns the local addresses of the TCP sockets in the LISTEN
// state that process pid holds open.
func listening(t *testing.T, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var addrs []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		s.Scan() // the header
		for s.Scan() {
			// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
			fields := strings.Fields(s.Text())
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] {
				addrs = append(addrs, table+" "+fields[1])
			}
		}
		f.Close()
	}
	return addrs
}

func testNoPort(r *runner) {
	t := r.t
	for _, name := range controllerCommands {
		for _, tc := range []struct {
			flag string
			want int // listening sockets
		}{
			{"0", 0},
			{"127.0.0.1:0", 1}, // the check can see a server when there is one
		} {
			args := append(r.args(name, "default", t.TempDir()), "--kubeconfig", r.env.KubeconfigPath, "--metrics-bind-address", tc.flag)
			p := r.start(name, nil, args...)
			p.stderr.WaitFor(t, name+"'s synced log", synced[name])
			if got := listening(t, p.cmd.Process.Pid); len(got) != tc.want {
				t.Errorf("%s --metrics-bind-address %s: listening on %v, want %d sockets", name, tc.flag, got, tc.want)
			}
			p.stop(t)
		}
	}
}

// writeDeadKubeconfig writes a kubeconfig for an API server that is not
// there: port is a port nothing listens on.
func writeDeadKubeconfig(t *testing.T, path string, port int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: dead, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: dead, context: {cluster: dead, user: u}}]
current-context: dead
`, port)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Ports nothing listens on (privileged, never bound here), one per place
// a kubeconfig can come from, so a log line says which was tried.
const (
	flagPort = 1
	envPort  = 2
	homePort = 3
)

func testKubeconfigOrder(r *runner) {
	t := r.t
	real := r.env.KubeconfigPath
	for _, tc := range []struct {
		name            string
		flag, env, home string // "real", "dead" or "" (none)
		wantSync        bool
		wantTriedPort   int // when not syncing: the port the logs show tried
	}{
		{"the flag wins over $KUBECONFIG and ~/.kube/config", "real", "dead", "dead", true, 0},
		{"$KUBECONFIG wins over ~/.kube/config", "", "real", "dead", true, 0},
		{"~/.kube/config when neither is given", "", "", "real", true, 0},
		{"a dead server in the flag is not bypassed", "dead", "real", "real", false, flagPort},
		{"nor a dead one in $KUBECONFIG", "", "dead", "real", false, envPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range controllerCommands {
				home := t.TempDir()
				dir := t.TempDir()
				place := func(which, path string, port int) bool {
					switch which {
					case "real":
						copyFile(t, real, path)
					case "dead":
						writeDeadKubeconfig(t, path, port)
					default:
						return false
					}
					return true
				}
				env := []string{"HOME=" + home}
				var args []string
				if p := filepath.Join(dir, "flag"); place(tc.flag, p, flagPort) {
					args = append(args, "--kubeconfig", p)
				}
				if p := filepath.Join(dir, "env"); place(tc.env, p, envPort) {
					env = append(env, "KUBECONFIG="+p)
				}
				place(tc.home, filepath.Join(home, ".kube", "config"), homePort)

				sub := &runner{t: t, bin: r.bin, env: r.env}
				p := sub.start(name, env, append(sub.args(name, "default", dir), args...)...)
				if tc.wantSync {
					p.stderr.WaitFor(t, name+"'s synced log", synced[name])
				} else {
					p.stderr.WaitFor(t, name+"'s log of the dead server", regexp.MustCompile(`dial tcp 127\.0\.0\.1:`+strconv.Itoa(tc.wantTriedPort)+`:`))
					// It may wait and retry, or give up (the builder's
					// discovery fails at once): either way it never syncs.
					p.end(t)
					for _, l := range p.stderr.All() {
						if synced[name].MatchString(l) {
							t.Errorf("%s synced with a dead server first in line: %s", name, l)
						}
					}
					continue
				}
				p.stop(t)
			}
		})
	}
}

// Short lease timings for the leader-election test: whole seconds for the
// lease (a Lease stores seconds), a retry period well below the deadline.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = 500 * time.Millisecond
)

// startedLeading is the elector's log line of an acquisition, with the
// durations of the API calls it took.
var startedLeading = regexp.MustCompile(`msg="started leading".* acquireRequest=\S+ changeRead=\S+`)

// schedulingSlack is what the leader-election test allows beyond the
// elector's bound for timers firing late and goroutines waiting for a core
// when the test machine is loaded (2 cores running other tests' control
// planes): the bound itself has no slack.
const schedulingSlack = 200 * time.Millisecond

// timeField returns the time= of a text log line (slog's RFC 3339 with
// milliseconds).
func timeField(t *testing.T, line string) time.Time {
	t.Helper()
	m := regexp.MustCompile(`(?:^| )time=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no time= in the log line %s", line)
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatalf("time=%s in the log line %s: %v", m[1], line, err)
	}
	return at
}

// durationField returns the duration logged as key=value in a text log
// line.
func durationField(t *testing.T, line, key string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?:^| )` + key + `=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in the log line %s", key, line)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("%s=%s in the log line %s: %v", key, m[1], line, err)
	}
	return d
}

func testLeaderElection(r *runner) {
	t := r.t
	kc := kubernetes.NewForConfigOrDie(r.env.Config)
	ns := testenv.NewNamespace(t, kc, "leader")
	args := []string{"--kubeconfig", r.env.KubeconfigPath, "--namespace", ns,
		"--leader-elect", "--leader-elect-namespace", ns,
		"--leader-elect-lease-duration", testLeaseDuration.String(),
		"--leader-elect-renew-deadline", testRenewDeadline.String(),
		"--leader-elect-retry-period", testRetryPeriod.String()}
	procs := []*proc{r.start("foo-controller", nil, args...), r.start("foo-controller", nil, args...)}
	became := regexp.MustCompile(`Became the leader`)
	i, _ := reexec.WaitForAny(t, "a leader", became, procs[0].stderr, procs[1].stderr)
	leader, standby := procs[i], procs[1-i]
	standby.stderr.WaitFor(t, "the standby's synced caches", regexp.MustCompile(`Caches synced`))

	foos, err := client.New(r.env.Config, client.Options{Scheme: foo.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	fooRes, err := client.NewResource[*v1alpha1.Foo](foos, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}
	createFoo := func(name string) {
		t.Helper()
		f, err := manifest.Decode[*v1alpha1.Foo](foo.Scheme(), foo.ExampleFooYAML)
		if err != nil {
			t.Fatal(err)
		}
		f.Namespace, f.Name, f.Spec.DeploymentName = ns, name, name
		if _, err := fooRes.Create(t.Context(), f); err != nil {
			t.Fatal(err)
		}
	}
	created := func(name string) *regexp.Regexp {
		return regexp.MustCompile(`msg="Created Deployment".* name=` + name + `( |$)`)
	}

	createFoo("first")
	leader.stderr.WaitFor(t, "the leader's reconcile of Foo first", created("first"))
	// The standby has the same caches and has seen the same Foo, but has
	// reconciled nothing: its controllers have not started.
	for _, l := range standby.stderr.All() {
		if became.MatchString(l) || created("first").MatchString(l) || strings.Contains(l, "Starting workers") {
			t.Errorf("the standby leads or reconciles while the leader runs: %s", l)
		}
	}

	killed := time.Now()
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	standby.stderr.WaitFor(t, "the standby taking over", became)
	// The standby reads the Lease at least every retry period, so it sees
	// the leader's last renewal (made before the kill) at most a retry
	// period after it, and takes over at the moment the lease expires,
	// LeaseDuration after that sighting. On top of lease + retry period come
	// only the two API calls of the takeover: the read whose answer showed
	// the last renewal (expiry counts from the answer) and the write that
	// acquired the lease. The standby logs how long both took.
	// The takeover's moment is the time the standby logged it at
	// (millisecond precision), not when this test read the line from its
	// pipe. What a loaded machine adds beyond that — the standby's expiry
	// timer firing late, its goroutines waiting for a core — is allowed
	// for by schedulingSlack and logged apart, so that a failure says which
	// part grew.
	acquired := standby.stderr.WaitFor(t, "the standby's log of its acquisition", startedLeading)
	took := timeField(t, acquired).Sub(killed)
	latency := durationField(t, acquired, "changeRead") + durationField(t, acquired, "acquireRequest")
	bound := testLeaseDuration + testRetryPeriod + latency
	t.Logf("takeover %v after SIGKILL of the leader (lease %v, retry period %v, API calls of the takeover %v, bound %v + %v for scheduling)",
		took.Round(time.Millisecond), testLeaseDuration, testRetryPeriod, latency, bound, schedulingSlack)
	if took > bound+schedulingSlack {
		t.Errorf("the standby took over %v after the leader's SIGKILL, want at most lease + retry period + its two API calls = %v (+ %v for scheduling on a loaded machine)", took, bound, schedulingSlack)
	}
	// The leader's last renewal came at most a retry period (and its
	// request) before the kill, and the standby waits LeaseDuration after
	// it saw it: no takeover before the lease could have expired.
	if took < testLeaseDuration-testRetryPeriod {
		t.Errorf("the standby took over %v after the leader's SIGKILL, before the lease (%v) could have expired", took, testLeaseDuration)
	}

	createFoo("second")
	standby.stderr.WaitFor(t, "the new leader's reconcile of Foo second", created("second"))
	if _, err := kc.AppsV1().Deployments(ns).Get(t.Context(), "second", metav1.GetOptions{}); err != nil {
		t.Errorf("the new leader's Deployment: %v", err)
	}
	_ = leader.cmd.Wait()
	standby.stop(t)
}
