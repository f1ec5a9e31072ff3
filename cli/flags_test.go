package cli_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/sharding"
)

// parsed is what the flags of one command line come to.
type parsed struct {
	qps    float32
	burst  int
	le     *kloop.LeaderElection
	sh     *kloop.Sharding
	metric string
	health string
	debug  string
	level  slog.Level
	format string
}

// parse registers NewFlags("demo") on a fresh flag set, parses args and
// converts every group, returning the first error.
func parse(args ...string) (parsed, error) {
	f := cli.NewFlags("demo")
	fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	f.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return parsed{}, err
	}
	if err := f.Validate(); err != nil {
		return parsed{}, err
	}
	le, err := f.LeaderElection.Options()
	if err != nil {
		return parsed{}, err
	}
	sh, err := f.Sharding.Options()
	if err != nil {
		return parsed{}, err
	}
	m, h, err := f.Serving.Addrs()
	if err != nil {
		return parsed{}, err
	}
	d, err := f.Serving.Debug()
	if err != nil {
		return parsed{}, err
	}
	lvl, err := f.Logging.SlogLevel()
	if err != nil {
		return parsed{}, err
	}
	return parsed{qps: f.Cluster.QPS, burst: f.Cluster.Burst, le: le, sh: sh, metric: m, health: h, debug: d, level: lvl, format: f.Logging.Format}, nil
}

func TestFlags_ParseToOptionsOrNameTheBadFlag(t *testing.T) {
	defaults := parsed{qps: -1, burst: 30, format: "text"}
	with := func(change func(*parsed)) parsed { p := defaults; change(&p); return p }
	defaultShard := &kloop.Sharding{Group: "demo", Key: sharding.ByNamespace, Slots: 64, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	defaultLE := &kloop.LeaderElection{ID: "demo-leader", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	for _, tc := range []struct {
		name    string
		args    []string
		want    parsed
		wantErr string // the error names this (the flag, and what to fix)
	}{
		{name: "defaults: no throttling, no election, nothing listens, info text", want: defaults},

		{name: "leader election with controller-runtime's timings", args: []string{"--leader-elect"},
			want: with(func(p *parsed) { p.le = defaultLE })},
		{name: "leader election in full",
			args: []string{"--leader-elect", "--leader-elect-namespace", "kube-system", "--leader-elect-id", "foo.example.com",
				"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"},
			want: with(func(p *parsed) {
				p.le = &kloop.LeaderElection{Namespace: "kube-system", ID: "foo.example.com", LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
			})},
		{name: "bad lease timings are ignored without --leader-elect", args: []string{"--leader-elect-lease-duration", "0s"}, want: defaults},
		{name: "renew deadline not below the lease duration", args: []string{"--leader-elect", "--leader-elect-renew-deadline", "15s"},
			wantErr: `--leader-elect-renew-deadline "15s": want less than --leader-elect-lease-duration (15s)`},
		{name: "retry period not below the renew deadline", args: []string{"--leader-elect", "--leader-elect-retry-period", "10s"},
			wantErr: `--leader-elect-retry-period "10s": want less than --leader-elect-renew-deadline (10s)`},
		{name: "zero lease duration", args: []string{"--leader-elect", "--leader-elect-lease-duration", "0s"},
			wantErr: `--leader-elect-lease-duration "0s": want a positive duration`},
		{name: "negative retry period", args: []string{"--leader-elect", "--leader-elect-retry-period=-1s"},
			wantErr: `--leader-elect-retry-period "-1s": want a positive duration`},
		{name: "bad namespace", args: []string{"--leader-elect", "--leader-elect-namespace", "Not_Valid"},
			wantErr: `--leader-elect-namespace "Not_Valid": not a namespace name`},
		{name: "bad lease name", args: []string{"--leader-elect", "--leader-elect-id", "a/b"},
			wantErr: `--leader-elect-id "a/b": not a Lease name`},
		{name: "duration without a unit", args: []string{"--leader-elect-lease-duration", "15"},
			wantErr: `invalid argument "15" for "--leader-elect-lease-duration"`},

		{name: "sharding with the defaults of leader election, grouped by the program's name", args: []string{"--shard"},
			want: with(func(p *parsed) { p.sh = defaultShard })},
		{name: "sharding in full",
			args: []string{"--shard", "--shard-group", "foos", "--shard-key", "uid", "--shard-slots", "16", "--shard-namespace", "kube-system",
				"--shard-lease-duration", "6s", "--shard-renew-deadline", "4s", "--shard-retry-period", "1s", "--shard-client-side-only"},
			want: with(func(p *parsed) {
				p.sh = &kloop.Sharding{Group: "foos", Key: sharding.ByUID, Slots: 16, Namespace: "kube-system",
					LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second, ClientSideOnly: true}
			})},
		{name: "shard flags are ignored without --shard", args: []string{"--shard-key", "hash", "--shard-slots", "0"}, want: defaults},
		{name: "sharding and leader election together", args: []string{"--shard", "--leader-elect"},
			wantErr: "--shard and --leader-elect: give one of them"},
		{name: "an unknown shard key", args: []string{"--shard", "--shard-key", "name"},
			wantErr: `--shard-key "name": want namespace or uid`},
		{name: "no slots", args: []string{"--shard", "--shard-slots", "0"},
			wantErr: `--shard-slots "0": want a number from 1 to 4096`},
		{name: "too many slots", args: []string{"--shard", "--shard-slots", "4097"},
			wantErr: `--shard-slots "4097": want a number from 1 to 4096`},
		{name: "a group that is no DNS label", args: []string{"--shard", "--shard-group", "Foo.Controller"},
			wantErr: `--shard-group "Foo.Controller": not a DNS label`},
		{name: "a bad Lease namespace", args: []string{"--shard", "--shard-namespace", "Not_Valid"},
			wantErr: `--shard-namespace "Not_Valid": not a namespace name`},
		{name: "a lease duration of part of a second", args: []string{"--shard", "--shard-lease-duration", "4500ms"},
			wantErr: `--shard-lease-duration "4.5s": want whole seconds`},
		{name: "a zero retry period", args: []string{"--shard", "--shard-retry-period", "0s"},
			wantErr: `--shard-retry-period "0s": want a positive duration`},
		{name: "shard renew deadline not below the lease duration", args: []string{"--shard", "--shard-renew-deadline", "15s"},
			wantErr: `--shard-renew-deadline "15s": want less than --shard-lease-duration (15s)`},
		{name: "shard retry period not below the renew deadline", args: []string{"--shard", "--shard-retry-period", "10s"},
			wantErr: `--shard-retry-period "10s": want less than --shard-renew-deadline (10s)`},

		{name: "metrics and probes on", args: []string{"--metrics-bind-address", ":8080", "--health-probe-bind-address", "127.0.0.1:8081"},
			want: with(func(p *parsed) { p.metric, p.health = ":8080", "127.0.0.1:8081" })},
		{name: "a free port", args: []string{"--metrics-bind-address=127.0.0.1:0"}, want: with(func(p *parsed) { p.metric = "127.0.0.1:0" })},
		{name: "IPv6 and a host name", args: []string{"--metrics-bind-address=[::1]:9090", "--health-probe-bind-address=localhost:9091"},
			want: with(func(p *parsed) { p.metric, p.health = "[::1]:9090", "localhost:9091" })},
		{name: "0 and empty are off", args: []string{"--metrics-bind-address", "0", "--health-probe-bind-address="}, want: defaults},
		{name: "a port without a colon", args: []string{"--metrics-bind-address", "8080"},
			wantErr: `--metrics-bind-address "8080": not host:port; want host:port such as ":8080"`},
		{name: "a named port", args: []string{"--health-probe-bind-address", ":http"},
			wantErr: `--health-probe-bind-address ":http": the port is not a number from 0 to 65535`},
		{name: "a port out of range", args: []string{"--metrics-bind-address", ":65536"},
			wantErr: `--metrics-bind-address ":65536": the port is not a number`},
		{name: "a URL", args: []string{"--metrics-bind-address", "http://x:80"},
			wantErr: `--metrics-bind-address "http://x:80": not host:port`},
		{name: "the debug page on loopback", args: []string{"--debug-bind-address", "127.0.0.1:8082"},
			want: with(func(p *parsed) { p.debug = "127.0.0.1:8082" })},
		{name: "the debug page off", args: []string{"--debug-bind-address", "0"}, want: defaults},
		{name: "the debug page beyond loopback, unauthenticated", args: []string{"--debug-bind-address", ":8082"},
			wantErr: `--debug-bind-address ":8082": not loopback, and the page has no authentication; want an address such as "127.0.0.1:8082", or --metrics-secure as well`},
		{name: "the debug page anywhere behind --metrics-secure", args: []string{"--metrics-secure", "--debug-bind-address", ":8082"},
			want: with(func(p *parsed) { p.debug = ":8082" })},
		{name: "a bad debug address", args: []string{"--debug-bind-address", "8082"},
			wantErr: `--debug-bind-address "8082": not host:port`},

		{name: "client-side throttling on", args: []string{"--kube-api-qps", "50", "--kube-api-burst", "100"},
			want: with(func(p *parsed) { p.qps, p.burst = 50, 100 })},
		{name: "throttling off explicitly", args: []string{"--kube-api-qps=-1"}, want: defaults},
		{name: "a negative QPS other than -1", args: []string{"--kube-api-qps=-5"},
			wantErr: `--kube-api-qps "-5": want a positive number of requests a second, or -1 for no client-side limit`},
		{name: "zero QPS (client-go would read it as 5)", args: []string{"--kube-api-qps", "0"},
			wantErr: `--kube-api-qps "0": want a positive number`},
		{name: "infinite QPS", args: []string{"--kube-api-qps", "+Inf"}, wantErr: `--kube-api-qps "+Inf"`},
		{name: "zero burst", args: []string{"--kube-api-burst", "0"}, wantErr: `--kube-api-burst "0": want a positive number`},

		{name: "debug", args: []string{"--log-level", "debug"}, want: with(func(p *parsed) { p.level = slog.LevelDebug })},
		{name: "level names ignore case", args: []string{"--log-level", "WARN"}, want: with(func(p *parsed) { p.level = slog.LevelWarn })},
		{name: "error", args: []string{"--log-level=error"}, want: with(func(p *parsed) { p.level = slog.LevelError })},
		{name: "klog's -v=4 is debug", args: []string{"-v=4"}, want: with(func(p *parsed) { p.level = slog.LevelDebug })},
		{name: "klog's -v 2 sits between debug and info", args: []string{"-v", "2"}, want: with(func(p *parsed) { p.level = -2 })},
		{name: "--v=0 is info", args: []string{"--v=0"}, want: defaults},
		{name: "a level klog does not have", args: []string{"-v=-1"}, wantErr: `invalid argument "-1" for "-v, --v" flag: want a number from 0 up`},
		{name: "an unknown level", args: []string{"--log-level", "loud"},
			wantErr: `--log-level "loud": want debug, info, warn or error (or klog's -v=N)`},
		{name: "both a level and -v", args: []string{"--log-level", "debug", "-v", "4"},
			wantErr: `--log-level debug and -v 4: give one of them`},
		{name: "json", args: []string{"--log-format", "json"}, want: with(func(p *parsed) { p.format = "json" })},
		{name: "an unknown format", args: []string{"--log-format", "xml"}, wantErr: `--log-format "xml": want text or json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse(%q) error %v, want one containing %q", tc.args, err, tc.wantErr)
				}
				if strings.HasPrefix(tc.wantErr, "--") && !cli.IsUsage(err) {
					t.Errorf("error %v is not a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parse(%q)\n got %+v (le %+v, sh %+v)\nwant %+v (le %+v, sh %+v)", tc.args, got, got.le, got.sh, tc.want, tc.want.le, tc.want.sh)
			}
		})
	}
}

func TestFlagError_NamesFlagValueAndFix(t *testing.T) {
	err := error(&cli.FlagError{Flag: "--log-level", Value: "loud", Want: "want debug, info, warn or error"})
	if got, want := err.Error(), `--log-level "loud": want debug, info, warn or error`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("context"), err)
	if !cli.IsUsage(wrapped) || !cli.IsUsage(cli.Usagef("x %d", 1)) || cli.IsUsage(errors.New("plain")) {
		t.Error("IsUsage does not tell usage errors from the others")
	}
}

func TestServing_MetricsSecureTurnsSecuredMetricsOnAndCertDirNeedsIt(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    bool
		certDir string
		bad     string
	}{
		{args: nil},
		{args: []string{"--metrics-secure"}, want: true},
		{args: []string{"--metrics-secure", "--metrics-cert-dir=/etc/certs"}, want: true, certDir: "/etc/certs"},
		{args: []string{"--metrics-cert-dir=/etc/certs"}, bad: "--metrics-cert-dir"},
	} {
		f := cli.NewFlags("demo")
		fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := f.Validate()
		if tc.bad != "" {
			var fe *cli.FlagError
			if !errors.As(err, &fe) || fe.Flag != tc.bad {
				t.Errorf("%q: error %v, want a FlagError naming %s", tc.args, err, tc.bad)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		so, err := f.Serving.Secure()
		if err != nil || (so != nil) != tc.want || (so != nil && so.CertDir != tc.certDir) {
			t.Errorf("%q: Secure() = %+v, %v; want secured %v with cert dir %q", tc.args, so, err, tc.want, tc.certDir)
		}
	}
}

// TestFlags_ConfigFillsShardingOrRefusesItWithLeaderElection runs a
// command the way a program does (cli.Run) and checks that --shard reaches
// kloop.Options.Sharding, and that --shard with --leader-elect is a usage
// error (exit 2) before the command runs.
func TestFlags_ConfigFillsShardingOrRefusesItWithLeaderElection(t *testing.T) {
	run := func(args ...string) (kloop.Options, bool, int, string) {
		flags := cli.NewFlags("demo")
		var opts kloop.Options
		ran := false
		cmd := &cobra.Command{Use: "demo", RunE: func(cmd *cobra.Command, _ []string) error {
			_, o, err := flags.Config(cmd)
			opts, ran = o, err == nil
			return err
		}}
		flags.AddFlags(cmd.Flags())
		var stderr strings.Builder
		code := cli.Run(t.Context(), cmd, append([]string{"--master", "https://127.0.0.1:6443"}, args...), io.Discard, &stderr)
		return opts, ran, code, stderr.String()
	}

	opts, ran, code, stderr := run("--shard", "--shard-namespace", "foo-system", "--shard-key", "uid", "--shard-lease-duration", "6s",
		"--shard-renew-deadline", "4s", "--shard-retry-period", "1s")
	want := &kloop.Sharding{Group: "demo", Key: sharding.ByUID, Slots: 64, Namespace: "foo-system",
		LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}
	if code != cli.ExitOK || !ran || !reflect.DeepEqual(opts.Sharding, want) || opts.LeaderElection != nil {
		t.Errorf("--shard: exit %d (ran %v, stderr %q), Sharding %+v, LeaderElection %+v; want exit 0, Sharding %+v and no leader election",
			code, ran, stderr, opts.Sharding, opts.LeaderElection, want)
	}

	if opts, _, code, _ := run(); opts.Sharding != nil || code != cli.ExitOK {
		t.Errorf("no --shard: exit %d, Sharding %+v; want exit 0 and nil", code, opts.Sharding)
	}

	_, ran, code, stderr = run("--shard", "--leader-elect")
	if code != cli.ExitUsage || ran || !strings.Contains(stderr, "--shard and --leader-elect: give one of them") {
		t.Errorf("--shard --leader-elect: exit %d, ran %v, stderr %q; want exit 2 naming both flags", code, ran, stderr)
	}
}

// The webhook flags reach kloop.Options as given, and a webhook address
// without a certificate directory (or local mode) is refused, naming the
// flag and what to add.
func TestFlags_WebhookFlagsReachOptionsOrNameWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want kloop.Options // only the webhook fields
		self *kloop.SelfSignedWebhooks
		bad  string
	}{
		{args: []string{"--webhook-bind-address", ":9443", "--webhook-self-signed-secret", "hooks-cert"},
			want: kloop.Options{WebhookAddr: ":9443"}, self: &kloop.SelfSignedWebhooks{Secret: "hooks-cert"}},
		{args: []string{"--webhook-bind-address", ":9443", "--webhook-self-signed-secret", "hooks-cert", "--webhook-service", "hooks", "--webhook-service-namespace", "system", "--webhook-cert-dir", "/certs"},
			want: kloop.Options{WebhookAddr: ":9443", WebhookCertDir: "/certs"}, self: &kloop.SelfSignedWebhooks{Secret: "hooks-cert", Service: "hooks", Namespace: "system"}},
		{args: []string{"--webhook-self-signed-secret", "hooks-cert"}, bad: "--webhook-self-signed-secret \"hooks-cert\": --webhook-bind-address as well"},
		{args: []string{"--webhook-local", "--webhook-self-signed-secret", "hooks-cert"}, bad: "not with --webhook-local"},
		{args: []string{"--webhook-bind-address", ":9443", "--webhook-cert-dir", "/certs", "--webhook-service", "hooks"}, bad: "--webhook-service"},
		{args: nil},
		{args: []string{"--webhook-bind-address", ":9443", "--webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs"},
			want: kloop.Options{WebhookAddr: ":9443", WebhookCertDir: "/tmp/k8s-webhook-server/serving-certs"}},
		{args: []string{"--webhook-local"}, want: kloop.Options{WebhookLocal: true}},
		{args: []string{"--webhook-local", "--webhook-bind-address", "127.0.0.1:9443"}, want: kloop.Options{WebhookLocal: true, WebhookAddr: "127.0.0.1:9443"}},
		{args: []string{"--webhook-bind-address", ":9443"}, bad: "--webhook-bind-address"},
		{args: []string{"--webhook-cert-dir", "/certs"}, bad: "--webhook-cert-dir"},
		{args: []string{"--webhook-bind-address", "9443", "--webhook-local"}, bad: "--webhook-bind-address"},
	} {
		opts, code, stderr := configOf(t, tc.args...)
		if tc.bad != "" {
			if code != cli.ExitUsage || !strings.Contains(stderr, tc.bad) {
				t.Errorf("%q: exit %d, stderr %q; want a usage error naming %s", tc.args, code, stderr, tc.bad)
			}
			continue
		}
		got := kloop.Options{WebhookAddr: opts.WebhookAddr, WebhookCertDir: opts.WebhookCertDir, WebhookLocal: opts.WebhookLocal}
		if (opts.WebhookSelfSigned == nil) != (tc.self == nil) || tc.self != nil && *opts.WebhookSelfSigned != *tc.self {
			t.Errorf("%q: WebhookSelfSigned %+v, want %+v", tc.args, opts.WebhookSelfSigned, tc.self)
		}
		same := got.WebhookAddr == tc.want.WebhookAddr && got.WebhookCertDir == tc.want.WebhookCertDir && got.WebhookLocal == tc.want.WebhookLocal
		if code != cli.ExitOK || !same {
			t.Errorf("%q: exit %d (stderr %q), webhook options %+v; want exit 0 and %+v", tc.args, code, stderr, got, tc.want)
		}
	}
}

func TestFlags_MemoryLimitReachesOptionsOrNamesTheBadValue(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int64
		bad  bool
	}{
		{"", 0, false}, // the default: auto
		{"--memory-limit=auto", 0, false},
		{"--memory-limit=off", -1, false},
		{"--memory-limit=400Mi", 400 << 20, false},
		{"--memory-limit=1G", 1e9, false},
		{"--memory-limit=-5Mi", 0, true},
		{"--memory-limit=lots", 0, true},
	} {
		var args []string
		if tc.arg != "" {
			args = append(args, tc.arg)
		}
		opts, code, stderr := configOf(t, args...)
		switch {
		case tc.bad && (code != cli.ExitUsage || !strings.Contains(stderr, "--memory-limit") || !strings.Contains(stderr, "auto, off, or a positive quantity")):
			t.Errorf("%s: exit %d, stderr %q; want a usage error naming the flag and what it takes", tc.arg, code, stderr)
		case !tc.bad && (code != cli.ExitOK || opts.MemoryLimit != tc.want):
			t.Errorf("%s: exit %d (%s), MemoryLimit %d; want %d", tc.arg, code, stderr, opts.MemoryLimit, tc.want)
		}
	}
}

func TestFlags_EncodedCacheUnderReachesMemoryOrNamesTheBadValue(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int64
		bad  bool
	}{
		{"", 0, false}, // the default: never
		{"--encoded-cache-under=0", 0, false},
		{"--encoded-cache-under=512Mi", 512 << 20, false},
		{"--encoded-cache-under=1G", 1e9, false},
		{"--encoded-cache-under=-5Mi", 0, true},
		{"--encoded-cache-under=half", 0, true},
	} {
		var args []string
		if tc.arg != "" {
			args = append(args, tc.arg)
		}
		opts, code, stderr := configOf(t, args...)
		switch {
		case tc.bad && (code != cli.ExitUsage || !strings.Contains(stderr, "--encoded-cache-under") || !strings.Contains(stderr, "0 (never) or a quantity of bytes")):
			t.Errorf("%s: exit %d, stderr %q; want a usage error naming the flag and what it takes", tc.arg, code, stderr)
		case !tc.bad && (code != cli.ExitOK || opts.Memory.EncodedUnder != tc.want || opts.Memory.Encoded):
			t.Errorf("%s: exit %d (%s), Memory %+v; want EncodedUnder %d", tc.arg, code, stderr, opts.Memory, tc.want)
		}
	}
}

func TestFlags_WaitForKindsReachesOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false}, // the default: a kind not served is an error
		{[]string{"--wait-for-kinds"}, true},
		{[]string{"--wait-for-kinds=false"}, false},
	} {
		opts, code, stderr := configOf(t, tc.args...)
		if code != cli.ExitOK || opts.WaitForKinds != tc.want {
			t.Errorf("%v: exit %d (%s), WaitForKinds %v; want %v", tc.args, code, stderr, opts.WaitForKinds, tc.want)
		}
	}
}

func TestFlags_NamespaceTakesOneOrSeveralNamespaces(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		namespace string
		set       []string
		bad       bool
	}{
		{args: nil},
		{args: []string{"--namespace", "web"}, namespace: "web"},
		{args: []string{"--namespace", "a,b,c"}, set: []string{"a", "b", "c"}},
		{args: []string{"--namespace", "a", "--namespace", "b"}, set: []string{"a", "b"}},
		{args: []string{"--namespace", "a,Not_A_Name"}, bad: true},
		{args: []string{"--namespace", "a,,b"}, bad: true},
	} {
		opts, code, stderr := configOf(t, tc.args...)
		switch {
		case tc.bad && (code != cli.ExitUsage || !strings.Contains(stderr, "--namespace") || !strings.Contains(stderr, "is not one")):
			t.Errorf("%q: exit %d, stderr %q; want a usage error naming the flag and the bad name", tc.args, code, stderr)
		case !tc.bad && (code != cli.ExitOK || opts.Namespace != tc.namespace || !slices.Equal(opts.Namespaces, tc.set)):
			t.Errorf("%q: exit %d (%s), Namespace %q, Namespaces %q; want %q, %q", tc.args, code, stderr, opts.Namespace, opts.Namespaces, tc.namespace, tc.set)
		}
	}
}

// --trace-endpoint, or the OTEL_* environment, gives the App an exporter
// (package otlp's); without either it has none.
func TestFlags_TraceEndpointGivesTheAppAnExporter(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	if opts, code, stderr := configOf(t); code != cli.ExitOK || opts.Traces != nil {
		t.Errorf("no --trace-endpoint: exit %d (%s), Traces %v; want exit 0 and none", code, stderr, opts.Traces)
	}
	opts, code, stderr := configOf(t, "--trace-endpoint", "http://127.0.0.1:4318")
	if code != cli.ExitOK || opts.Traces == nil {
		t.Fatalf("--trace-endpoint: exit %d (%s), Traces %v; want exit 0 and an exporter", code, stderr, opts.Traces)
	}
	if s, ok := opts.Traces.(interface{ Shutdown(context.Context) error }); !ok || s.Shutdown(t.Context()) != nil {
		t.Errorf("the exporter %T has no Shutdown the App can call, or it failed", opts.Traces)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, code, stderr := configOf(t, "--trace-endpoint", "http://127.0.0.1:4318"); code == cli.ExitOK || !strings.Contains(stderr, "set it to http/protobuf") {
		t.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: exit %d, stderr %q; want a failure saying to set http/protobuf", code, stderr)
	}
}

// configOf runs a command the way a program does (cli.Run), with
// --master and args, and returns the kloop.Options its flags gave, the
// exit code and what it wrote to stderr.
func configOf(t *testing.T, args ...string) (kloop.Options, int, string) {
	t.Helper()
	flags := cli.NewFlags("demo")
	var opts kloop.Options
	cmd := &cobra.Command{Use: "demo", RunE: func(cmd *cobra.Command, _ []string) error {
		_, o, err := flags.Config(cmd)
		opts = o
		return err
	}}
	flags.AddFlags(cmd.Flags())
	var stderr strings.Builder
	code := cli.Run(t.Context(), cmd, append([]string{"--master", "https://127.0.0.1:6443"}, args...), io.Discard, &stderr)
	return opts, code, stderr.String()
}
