package kloop

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// Options configures an App. The zero value works: the built-in types of
// client-go's scheme, every namespace, slog.Default(), the kloop metrics
// registry, no HTTP server and no leader election.
type Options struct {
	// Name names the program: it is the field manager of its writes, the
	// source of its events, the default leader-election lease name and the
	// "app" attribute of its logs. Default "kloop".
	Name string

	// Scheme maps Go types to API kinds. It must hold every type the App
	// handles (Objects) with its list type. Default: client-go's scheme of
	// the built-in types. For custom resources build one with both.
	Scheme *runtime.Scheme

	// Namespace limits every informer to one namespace; "" means all
	// namespaces. Cluster-scoped kinds are always watched whole.
	Namespace string
	// Namespaces limits every informer of a namespaced kind to these
	// namespaces, for a program granted only them (a Role in each, no
	// cluster-wide list): one list and watch per namespace, merged into
	// one cache, so Get and List read every namespace of the set ("" in
	// List: all of them), and handlers and controllers see the events of
	// each. A namespace that cannot be listed (forbidden, or missing) is
	// retried, logged and named in /readyz?verbose, without holding up the
	// others; the App stays ready. One namespace is the same as Namespace;
	// not with Namespace. Leases then default to the pod's namespace, and
	// WebhookLocal's webhooks are not limited to the set.
	Namespaces []string

	// WaitForKinds makes the App wait for custom kinds that are not
	// served, instead of failing: a kind whose CRD is not installed when
	// Objects is called (or that is deleted later) gets an empty, synced
	// cache, the controllers whose For or Owns it is hold their workers,
	// and discovery is polled every 2 s; once the kind is served its
	// informers list at once and its controllers run, and if it goes
	// again they stop and hold, without a restart of the process.
	// /readyz?verbose and the debug page name each kind waited for
	// ("waiting for kind Foo samplecontroller.k8s.io/v1alpha1: not
	// served"), and the App stays ready. A kind that Objects does not
	// find is watched under the resource name its kind guesses (Foo:
	// foos) and namespaced unless ObjectsOptions.ClusterScoped is set:
	// name another with ObjectsOptions.Resource. Built-in kinds never wait. Default false: a kind
	// that is not served is a declaration error that Run returns ("install
	// its CRD"), the clearest answer when the CRD should be there. See
	// docs/controllers.md.
	WaitForKinds bool

	// Logger receives every component's logs. Default slog.Default().
	Logger *slog.Logger

	// Registry is where every component registers its metrics and what
	// /metrics serves. Default: the kloop registry (metrics.Registry).
	// App.Options().Registry is the registry in use, never nil.
	Registry *prometheus.Registry

	// Clock is the App's time: its controllers' delays (Result.RequeueAfter,
	// retries' back-off, Debounce: controller.Options.Clock) and its
	// events' timestamps follow it, and a reconcile that needs the time
	// reads App.Options().Clock.Now(). A test gives a fake clock
	// (k8s.io/utils/clock/testing.NewFakeClock) to run a reconcile at the
	// time it wants, and steps it to run a requeued key again without
	// waiting. Timeouts, leases and the informers keep the real clock.
	// Default: the real clock; App.Options().Clock is never nil.
	Clock clock.Clock

	// MetricsAddr is where /metrics is served, for example ":8080" or
	// "127.0.0.1:0". "" or "0" means off.
	MetricsAddr string
	// SecureMetrics, if set, serves /metrics over TLS and only to callers
	// the API server authenticates (TokenReview) and authorizes
	// (SubjectAccessReview: get on the nonResourceURL /metrics), as
	// package metrics/secure describes; its Logger defaults to Logger.
	// Nil: plain HTTP to anyone. The program's own identity then needs
	// create on tokenreviews and subjectaccessreviews.
	SecureMetrics *secure.Options

	// DebugAddr is where the debug page is served (package debug): a live
	// view of the informers, queues, controllers, leader election and
	// shards, and its JSON at /debug/api/v1/snapshot. "" or "0" means off.
	// Without SecureMetrics it must be a loopback address, such as
	// "127.0.0.1:8082" (New fails otherwise); with it the page gets the TLS
	// and the authorization of /metrics (readers need get on the
	// non-resource URLs /debug and /debug/*), on any address. Debug returns
	// the server, for its URL.
	DebugAddr string
	// Traces, if set, traces the App's reconciles and their writes with
	// OpenTelemetry, with tracers from this provider: package otlp's New
	// makes one that sends the spans over OTLP/HTTP, configured by an
	// endpoint or the standard OTEL_* environment variables (cli does so
	// for --trace-endpoint); an OpenTelemetry SDK TracerProvider of the
	// program's own works too. If it has a Shutdown(context.Context) error
	// method (both do), Run calls it when it stops, so that the spans
	// still queued are sent (for at most 5 s). What the spans hold:
	// controller.Options.Tracer.
	//
	// Without it the App traces nothing and links no exporter; if the
	// OTEL_* environment asks for traces (OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, or OTEL_TRACES_EXPORTER=otlp,
	// without OTEL_SDK_DISABLED=true), New logs a warning saying to set
	// Traces, or OTEL_TRACES_EXPORTER=none, rather than ignore it.
	Traces trace.TracerProvider

	// HealthAddr is where /healthz and /readyz are served. "" or "0" means
	// off. It may equal MetricsAddr: then one server serves all three.
	HealthAddr string

	// WebhookAddr is where the webhook server (package webhook) listens
	// for the API server, such as ":9443"; "" or "0" means off unless
	// WebhookLocal is set. NewWebhook declares what it serves. It needs
	// WebhookCertDir.
	WebhookAddr string
	// WebhookCertDir holds the webhook server's tls.crt and tls.key, such
	// as a mounted cert-manager Secret; they are read again when they
	// change. With WebhookLocal it is where the generated CA and
	// certificate are written ("" for a temporary directory).
	WebhookCertDir string
	// WebhookLocal is local development mode, for a program run outside
	// the cluster: the webhook server listens on 127.0.0.1 (at
	// WebhookAddr's port, else a free one) with a certificate of its own
	// CA, and while Run runs the App installs webhook configurations named
	// Name+"-local" and the CRDs' conversion, pointing there (limited to
	// Namespace, if set), and removes them at the stop. WebhooksReady is
	// closed once the API server calls them. Their failurePolicy is Fail:
	// a process killed without a clean stop leaves them refusing requests
	// until the next start replaces them, or until they are deleted
	// (kubectl delete mutatingwebhookconfiguration,validatingwebhookconfiguration <Name>-local).
	WebhookLocal bool
	// WebhookSelfSigned, if set, is the in-cluster option without
	// cert-manager: at each start the App keeps a CA and a serving
	// certificate in a kubernetes.io/tls Secret (making them when the
	// Secret is missing, not for the Service's names or ending within 30
	// days), serves that certificate from WebhookCertDir ("" for a
	// temporary directory), and sets the CA as the caBundle of every
	// webhook whose clientConfig.service is the Service, in webhook
	// configurations and CRD conversions (see package webhook). It needs
	// WebhookAddr; not with WebhookLocal.
	WebhookSelfSigned *SelfSignedWebhooks

	// LeaderElection, if set, runs controllers only while this replica
	// holds a coordination.k8s.io Lease. Informers run on every replica,
	// so a standby has warm caches when it takes over.
	LeaderElection *LeaderElection

	// Sharding, if set, splits the controllers' objects between this
	// program's replicas instead of electing one leader (see Sharding).
	Sharding *Sharding

	// ShardOf, if set, shards the App's namespaced informers for a shard
	// group member that another App holds, as one cluster of that App's
	// fleet (package fleet gives it to each cluster's App); not with
	// Sharding or LeaderElection.
	ShardOf *ShardOf

	// ClientTimeout, if positive, bounds each request of the App's client
	// (its writes and its reads from the API server, not the informers'
	// lists and watches), so that a reconcile whose server stopped
	// answering gives up instead of holding a worker. Default: no bound.
	ClientTimeout time.Duration

	// ShutdownTimeout bounds the stop once the context is done. Default
	// 30s (manager.DefaultShutdownTimeout).
	ShutdownTimeout time.Duration

	// MemoryLimit is the Go memory limit (runtime/debug.SetMemoryLimit)
	// Run sets for the process, in bytes, so that the garbage collector
	// works harder near it instead of the kernel ending the process. 0,
	// the default, derives it from the container's memory limit (cgroup v2
	// memory.max, or v1 memory.limit_in_bytes): 90% of it, the rest left
	// for what the Go runtime does not count; with no container limit, or
	// when $GOMEMLIMIT is set, the limit is left as it is. Negative leaves
	// it as it is. Run logs the limit and why.
	MemoryLimit int64

	// Memory chooses how lean the App's informers' caches are (see
	// informer.Memory): Memory.EncodedUnder switches them to the encoded
	// cache when the Go memory limit Run sets is under it.
	Memory informer.Memory
}

// LeaderElection configures the App's leader election. The defaults are
// controller-runtime's.
type LeaderElection struct {
	// Namespace of the Lease. Default: the App's Namespace, else the
	// namespace of the pod's service account when running in a cluster;
	// New fails, saying so, when neither is known.
	Namespace string
	// ID is the Lease's name. Default: Options.Name + "-leader".
	ID string
	// Identity names this replica in the Lease. Default: host name and a
	// random suffix.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod: defaults
	// leaderelection.DefaultLeaseDuration, DefaultRenewDeadline and
	// DefaultRetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// SelfSignedWebhooks names what Options.WebhookSelfSigned uses; every field
// has a default.
type SelfSignedWebhooks struct {
	// Service is the Service in front of the webhook server. Default:
	// Options.Name + "-webhook-service" (kubebuilder's "webhook-service"
	// under a kustomize namePrefix of Name + "-").
	Service string
	// Namespace of the Service and the Secret. Default: the pod's own
	// namespace in a cluster; New fails, saying so, outside one.
	Namespace string
	// Secret is the kubernetes.io/tls Secret that keeps the CA (ca.crt)
	// and the serving certificate. Default: Options.Name +
	// "-webhook-server-cert".
	Secret string
}
