// Package cli is the command line every kloop command shares: one set of
// flags for the API server, leader election, sharding, the HTTP servers
// and the logs, a version subcommand, signal handling and exit codes. It is
// built on spf13/cobra and spf13/pflag, as kubectl and kubewatch are.
//
// # A command in four steps
//
// A controller command makes the flags, registers them on its cobra
// command, and in RunE turns them into what kloop.New takes with one call:
//
//	func main() {
//		flags := cli.NewFlags("hello-controller")
//		cmd := &cobra.Command{
//			Use: "hello-controller",
//			RunE: func(cmd *cobra.Command, _ []string) error {
//				cfg, opts, err := flags.Config(cmd) // *rest.Config, kloop.Options
//				if err != nil {
//					return err
//				}
//				app, err := kloop.New(cfg, opts)
//				if err != nil {
//					return err
//				}
//				// ... declare the controllers ...
//				return app.Run(cmd.Context())
//			},
//		}
//		flags.AddFlags(cmd.Flags())
//		cli.Main(cmd)
//	}
//
// Main runs the command under manager.SignalContext: the first SIGINT or
// SIGTERM cancels cmd.Context() for a graceful stop, a second exits 1 at
// once. A command keeps its own flags and subcommands next to these (see
// the Example); a command that talks to no API server registers only the
// logging flags (Logging.AddFlags, as kloop's own CLI does), and any
// command can change a default in Flags' groups before registering it.
//
// # The flags
//
// API server (Cluster):
//
//	--kubeconfig PATH    client-go's loading rules: this file, else $KUBECONFIG (a list, merged),
//	                     else ~/.kube/config, else the in-cluster configuration
//	--context NAME       kubeconfig context (default: its current-context)
//	--master URL         overrides the kubeconfig's server
//	--kube-api-qps -1    client-side throttling, see below
//	--kube-api-burst 30
//
// What is watched (Flags.Namespaces):
//
//	--namespace NS[,NS...]  the namespaced kinds' namespaces: one (kloop.Options.Namespace) or
//	                        several (Namespaces: one list and watch each); default every namespace
//
// sample-controller's single-dash -kubeconfig and -master (Go's flag
// package) keep working: Run rewrites exactly those two before parsing.
//
// Leader election (LeaderElection), with controller-runtime's defaults:
//
//	--leader-elect                        off by default
//	--leader-elect-namespace NS           default: the watched namespace, else the pod's own
//	--leader-elect-id NAME                the Lease's name; default <command>-leader
//	--leader-elect-lease-duration 15s     a standby takes over this long after the last renewal
//	--leader-elect-renew-deadline 10s     the leader stops leading when it could not renew for this long
//	--leader-elect-retry-period 2s        between attempts
//
// Informers run on every replica, so a standby has warm caches when it
// takes over; controllers run on the leader only.
//
// Sharding (Sharding), instead of leader election (kloop.Sharding; see
// docs/scaling.md):
//
//	--shard                          off by default; not with --leader-elect
//	--shard-group NAME               the replicas that share the work; default <command>
//	--shard-key namespace            or uid: the field whose hash places an object
//	--shard-slots 64                 parts the work is cut into (1 to 4096)
//	--shard-namespace NS             of the replicas' Leases; default: the watched namespace, else the pod's own
//	--shard-lease-duration 15s       the others take a killed replica's share this long after its last renewal
//	--shard-renew-deadline 10s       a replica that could not renew for this long gives its share up
//	--shard-retry-period 2s          between renewals
//	--shard-client-side-only         send no shard selector; keep this replica's share on the client
//
// Every replica of a group gives the same --shard-group, --shard-key and
// --shard-slots.
//
// HTTP (Serving), controller-runtime's names:
//
//	--metrics-bind-address ADDR          /metrics
//	--health-probe-bind-address ADDR     /healthz and /readyz
//	--metrics-secure                     /metrics over TLS, only to callers the API server
//	                                     authenticates and authorizes (package metrics/secure)
//	--metrics-cert-dir DIR               its tls.crt and tls.key (default: self-signed)
//	--debug-bind-address ADDR            the live debug page (package debug) at /debug/: loopback
//	                                     only, unless --metrics-secure gives it /metrics' guard
//
// An address is host:port (":8080", "127.0.0.1:0" for a free port); "0" or
// "" turns that server off. Both are off by default, so that nothing
// listens unless asked; the deploy manifests pass :8443 with
// --metrics-secure, and :8081. A command may pick other defaults (the notifier
// serves /metrics on kubewatch's :2112) and says so in its --help.
//
// Logs (Logging), to stderr:
//
//	--log-level info     debug, info, warn or error
//	--log-format text    text (slog key=value lines) or json (one object a line)
//	-v N                 klog's verbosity instead of --log-level: slog.Level(-N),
//	                     so 0 is info and 4 is debug
//
// Logging.Setup routes klog, and with it client-go's logs, into the same
// logger (klog.SetSlogLogger) and sets klog's verbosity to match, so a
// process writes one stream in one format.
//
// # Client-side throttling
//
// client-go throttles every client to 5 requests a second (burst 10)
// unless told otherwise: a controller creating 300 Deployments then spends
// a minute waiting on itself. kloop turns client-side throttling off by
// default (--kube-api-qps -1; client-go builds no rate limiter for a
// negative QPS), as controller-runtime's config loader does since v0.21
// (before, it defaulted to 20 and 30), on SIG API Machinery's advice: API
// Priority and Fairness, on in every supported Kubernetes release, queues
// and sheds load on the server, per priority level, with a view of the
// whole server that a bucket in one client lacks. A process that must not
// send more than a known rate (a herd of replicas, a shared server) sets
// one. A positive --kube-api-qps turns the bucket on with
// --kube-api-burst (default 30, kube-controller-manager's); 0 and other
// negative values are rejected, because client-go would read 0 as 5.
//
// # version
//
// Every command has a version subcommand printing the main module's
// version, the VCS revision and commit time (from debug.ReadBuildInfo, as
// the go command stamps them) and the Go toolchain. A build without VCS
// information (from a source tarball, or with -buildvcs=false) sets them
// at link time:
//
//	go build -ldflags "-X github.com/kloop-dev/kloop/cli.version=v1.2.3 \
//	  -X github.com/kloop-dev/kloop/cli.revision=$REV \
//	  -X github.com/kloop-dev/kloop/cli.buildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// # Errors and exit codes
//
// Run exits 0 on success, 2 when the command did not run because of how it
// was called (an unknown flag, command or argument; a value pflag cannot
// parse; a *FlagError or an error of Usagef), and 1 when it ran and failed. A
// *FlagError names the flag, the value and what to give instead:
//
//	foo-controller: --kube-api-qps "-5": want a positive number of requests a second, or -1 for no client-side limit
//	Run 'foo-controller --help' for usage.
//
// A failure after Logging.Setup is logged through that logger (as JSON with
// --log-format json), so that the last line of a failing process is in
// its log format too.
//
// # What it does not do
//
// It reads no config file and no environment variable of its own beyond
// client-go's ($KUBECONFIG, $HOME, the in-cluster service account);
// commands that honour others (the notifier's kubewatch variables) turn
// them into flag defaults before registering the flags.
package cli
