package cli

import (
	"net"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/tracing"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// Off is the address value that turns a server off ("" does too).
const Off = "0"

// Serving is where the command serves HTTP: --metrics-bind-address for
// /metrics and --health-probe-bind-address for /healthz and /readyz
// (controller-runtime's names). "0" or "" turns a server off. The fields
// hold the flag defaults until the flags are parsed.
//
// --metrics-secure serves /metrics over TLS to callers the API server
// authenticates and authorizes for get /metrics (package metrics/secure),
// with a self-signed certificate unless --metrics-cert-dir holds tls.crt
// and tls.key (a mounted kubernetes.io/tls Secret).
//
// --debug-bind-address serves the live debug page (package debug). It is
// plain HTTP on a loopback address only, unless --metrics-secure is on:
// then it has /metrics' TLS and authorization and may listen anywhere.
//
// --webhook-bind-address serves the admission and conversion webhooks
// (package webhook) with the tls.crt and tls.key of --webhook-cert-dir;
// --webhook-local serves them on 127.0.0.1 with a certificate of its own
// and installs their configurations while the program runs (local
// development).
//
// --webhook-self-signed-secret=NAME is the in-cluster option without
// cert-manager (kloop.Options.WebhookSelfSigned): at each start the
// program keeps a CA and a serving certificate in that kubernetes.io/tls
// Secret, serves it from --webhook-cert-dir (default: a temporary
// directory) and sets the CA as the caBundle of the webhooks that call the
// Service --webhook-service (default: the program's name +
// "-webhook-service") in --webhook-service-namespace (default: the pod's
// namespace).
type Serving struct {
	MetricsAddr    string
	HealthAddr     string
	MetricsSecure  bool
	MetricsCertDir string
	DebugAddr      string
	WebhookAddr    string
	WebhookCertDir string
	WebhookLocal   bool
	// WebhookSelfSignedSecret, WebhookService and WebhookServiceNamespace
	// are --webhook-self-signed-secret and the Service's flags.
	WebhookSelfSignedSecret string
	WebhookService          string
	WebhookServiceNamespace string
	// TraceEndpoint is --trace-endpoint: an OTLP/HTTP URL to send a span
	// per reconcile and per write to (otlp.Config.Endpoint, in
	// kloop.Options.Traces); "" leaves it to the OTEL_* environment
	// variables.
	TraceEndpoint string
}

// newServing returns kloop's defaults: both off, so that nothing listens
// unless asked. deploy/'s manifests pass :8443 (with --metrics-secure)
// and :8081.
func newServing() Serving {
	return Serving{MetricsAddr: Off, HealthAddr: Off, DebugAddr: Off, WebhookAddr: Off}
}

// addFlags registers the flags on fs, with s's fields as defaults.
func (s *Serving) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.MetricsAddr, "metrics-bind-address", s.MetricsAddr,
		`serve /metrics at this host:port, for example ":8080" or "127.0.0.1:0" (a free port); 0 turns it off`)
	fs.StringVar(&s.HealthAddr, "health-probe-bind-address", s.HealthAddr,
		`serve /healthz and /readyz at this host:port, for example ":8081"; 0 turns it off; the same address as --metrics-bind-address shares one server`)
	fs.BoolVar(&s.MetricsSecure, "metrics-secure", s.MetricsSecure,
		"serve /metrics over TLS, only to callers the API server authenticates and authorizes for get /metrics (TokenReview, SubjectAccessReview)")
	fs.StringVar(&s.MetricsCertDir, "metrics-cert-dir", s.MetricsCertDir,
		"with --metrics-secure: the directory holding tls.crt and tls.key to serve /metrics with (default: a self-signed certificate)")
	fs.StringVar(&s.DebugAddr, "debug-bind-address", s.DebugAddr,
		`serve the live debug page (informers, queues, reconciles, leader, shards) at /debug/ on this host:port, for example "127.0.0.1:8082"; a loopback address unless --metrics-secure is on, which gives it /metrics' TLS and authorization; 0 turns it off`)
	fs.StringVar(&s.TraceEndpoint, "trace-endpoint", s.TraceEndpoint,
		`send OpenTelemetry traces (a span per reconcile, with its causes, and per write) over OTLP/HTTP to this URL, for example "http://127.0.0.1:4318"; without it the OTEL_* environment variables decide (on with OTEL_EXPORTER_OTLP_ENDPOINT)`)
	fs.StringVar(&s.WebhookAddr, "webhook-bind-address", s.WebhookAddr,
		`serve the admission and conversion webhooks over TLS at this host:port, for example ":9443"; 0 turns them off`)
	fs.StringVar(&s.WebhookCertDir, "webhook-cert-dir", s.WebhookCertDir,
		"the directory holding the webhook server's tls.crt and tls.key (read again when they change); with --webhook-local, where its generated CA and certificate go (default: a temporary directory)")
	fs.BoolVar(&s.WebhookLocal, "webhook-local", s.WebhookLocal,
		"local development: serve the webhooks on 127.0.0.1 (at --webhook-bind-address's port, else a free one) with a certificate of a CA of its own, and install webhook configurations and CRD conversions pointing there while the program runs")
	fs.StringVar(&s.WebhookSelfSignedSecret, "webhook-self-signed-secret", s.WebhookSelfSignedSecret,
		"in a cluster without cert-manager: keep a self-signed CA and serving certificate in this kubernetes.io/tls Secret (made or renewed at the start), serve it, and set the CA as the caBundle of the webhook configurations and CRD conversions that call --webhook-service")
	fs.StringVar(&s.WebhookService, "webhook-service", s.WebhookService,
		`with --webhook-self-signed-secret: the Service in front of the webhook server (default: the program's name + "-webhook-service")`)
	fs.StringVar(&s.WebhookServiceNamespace, "webhook-service-namespace", s.WebhookServiceNamespace,
		"with --webhook-self-signed-secret: the namespace of the Service and the Secret (default: the pod's namespace)")
}

// selfSignedOptions returns the self-signed webhook options
// --webhook-self-signed-secret asks for, or nil.
func (s *Serving) selfSignedOptions() (*kloop.SelfSignedWebhooks, error) {
	if s.WebhookSelfSignedSecret == "" {
		for flag, v := range map[string]string{"--webhook-service": s.WebhookService, "--webhook-service-namespace": s.WebhookServiceNamespace} {
			if v != "" {
				return nil, &FlagError{Flag: flag, Value: v, Want: "--webhook-self-signed-secret as well (the Service is named for the self-signed certificate)"}
			}
		}
		return nil, nil
	}
	if s.WebhookLocal {
		return nil, &FlagError{Flag: "--webhook-self-signed-secret", Value: s.WebhookSelfSignedSecret, Want: "not with --webhook-local: local mode is for a program outside the cluster, the self-signed Secret for one behind a Service in it"}
	}
	if addr, _ := bindAddr("--webhook-bind-address", s.WebhookAddr); addr == "" {
		return nil, &FlagError{Flag: "--webhook-self-signed-secret", Value: s.WebhookSelfSignedSecret, Want: `--webhook-bind-address as well, such as ":9443" (the port the Service sends to)`}
	}
	return &kloop.SelfSignedWebhooks{Secret: s.WebhookSelfSignedSecret, Service: s.WebhookService, Namespace: s.WebhookServiceNamespace}, nil
}

// webhookAddr validates the webhook flags and returns the address, "" for off
// (or, with --webhook-local, for a free port).
func (s *Serving) webhookAddr() (string, error) {
	addr, err := bindAddr("--webhook-bind-address", s.WebhookAddr)
	if err != nil {
		return "", err
	}
	if addr != "" && !s.WebhookLocal && s.WebhookSelfSignedSecret == "" && s.WebhookCertDir == "" {
		return "", &FlagError{Flag: "--webhook-bind-address", Value: s.WebhookAddr,
			Want: "--webhook-cert-dir as well, the directory holding tls.crt and tls.key (a mounted Secret), --webhook-self-signed-secret for a self-signed certificate kept in a Secret, or --webhook-local for a certificate of its own"}
	}
	if addr == "" && !s.WebhookLocal && s.WebhookCertDir != "" {
		return "", &FlagError{Flag: "--webhook-cert-dir", Value: s.WebhookCertDir, Want: "--webhook-bind-address or --webhook-local as well (without them no webhook is served)"}
	}
	return addr, nil
}

// debugAddr validates --debug-bind-address and returns it, "" for off. Without
// --metrics-secure the page has no authentication, so its address must be
// a loopback one.
// traceEndpoint checks --trace-endpoint.
func (s *Serving) traceEndpoint() error {
	if s.TraceEndpoint == "" {
		return nil
	}
	if err := tracing.CheckEndpoint(s.TraceEndpoint); err != nil {
		return &FlagError{Flag: "--trace-endpoint", Value: s.TraceEndpoint, Want: "the OTLP/HTTP receiver's URL, such as http://127.0.0.1:4318"}
	}
	return nil
}

func (s *Serving) debugAddr() (string, error) {
	addr, err := bindAddr("--debug-bind-address", s.DebugAddr)
	if err != nil || addr == "" || s.MetricsSecure {
		return addr, err
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", &FlagError{Flag: "--debug-bind-address", Value: s.DebugAddr,
			Want: `not loopback, and the page has no authentication; want an address such as "127.0.0.1:8082", or --metrics-secure as well`}
	}
	return addr, nil
}

// secureOptions returns the secured-metrics options --metrics-secure asks for,
// or nil for plain HTTP.
func (s *Serving) secureOptions() (*secure.Options, error) {
	if !s.MetricsSecure {
		if s.MetricsCertDir != "" {
			return nil, &FlagError{Flag: "--metrics-cert-dir", Value: s.MetricsCertDir, Want: "--metrics-secure as well (without it /metrics is plain HTTP)"}
		}
		return nil, nil
	}
	return &secure.Options{CertDir: s.MetricsCertDir}, nil
}

// addrs validates the addresses and returns them, with "" for off.
func (s *Serving) addrs() (metrics, health string, err error) {
	if metrics, err = bindAddr("--metrics-bind-address", s.MetricsAddr); err != nil {
		return "", "", err
	}
	if health, err = bindAddr("--health-probe-bind-address", s.HealthAddr); err != nil {
		return "", "", err
	}
	return metrics, health, nil
}

// bindAddr checks a listen address without listening: host:port with an
// optional host and a numeric port.
func bindAddr(flag, addr string) (string, error) {
	if addr == "" || addr == Off {
		return "", nil
	}
	bad := func(why string) error {
		return &FlagError{Flag: flag, Value: addr, Want: why + `; want host:port such as ":8080" or "127.0.0.1:8080", or 0 for off`}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", bad("not host:port")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", bad("the port is not a number from 0 to 65535")
	}
	if host != "" && net.ParseIP(host) == nil {
		// A name is fine when it resolves to this host; listening says so.
		for _, r := range host {
			if !(r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return "", bad("the host is neither an IP address nor a host name")
			}
		}
	}
	return addr, nil
}
