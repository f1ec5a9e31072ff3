package cli

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/otlp"
)

// Flags are the conventions of a controller command, in five groups. Make
// them with NewFlags, change the defaults the command wants, register them
// with AddFlags, and after parsing turn them into a *rest.Config and
// kloop.Options with Config.
type Flags struct {
	// Name is the program's name: kloop.Options.Name and the default
	// Lease name.
	Name           string
	Cluster        Cluster
	LeaderElection LeaderElection
	Sharding       Sharding
	Serving        Serving
	Logging        Logging
	// Namespaces is --namespace: the namespaces whose objects the
	// program watches, one ("web") or several ("a,b", or the flag given
	// again), as kloop.Options.Namespace or Namespaces; none means every
	// namespace.
	Namespaces []string
	// MemoryLimit is --memory-limit: "auto" derives the Go memory limit
	// from the container's (kloop.Options.MemoryLimit 0), "off" leaves it
	// as it is, a quantity such as 400Mi sets it.
	MemoryLimit string
	// EncodedUnder is --encoded-cache-under: informers keep their cache
	// encoded when the memory budget (the Go memory limit) is under this
	// quantity (kloop.Options.Memory.EncodedUnder); "0", the default,
	// never switches.
	EncodedUnder string
	// WaitForKinds is --wait-for-kinds (kloop.Options.WaitForKinds): a
	// custom kind whose CRD is not served is waited for, not an error.
	WaitForKinds bool
}

// NewFlags returns kloop's defaults for the program name: client-go's
// kubeconfig loading rules, no client-side throttling, no leader
// election, no sharding, no HTTP server, info logs as text.
func NewFlags(name string) *Flags {
	return &Flags{
		Name:           name,
		Cluster:        newCluster(),
		LeaderElection: newLeaderElection(name),
		Sharding:       newSharding(name),
		Serving:        newServing(),
		Logging:        Logging{Level: "info", Format: "text"},
		MemoryLimit:    "auto",
		EncodedUnder:   "0",
	}
}

// AddFlags registers every group's flags on fs, with f's fields as
// defaults. Register on cmd.Flags() for the command alone, or on
// cmd.PersistentFlags() to have its subcommands take them too.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	f.Cluster.addFlags(fs)
	f.LeaderElection.addFlags(fs)
	f.Sharding.addFlags(fs)
	f.Serving.addFlags(fs)
	f.Logging.AddFlags(fs)
	fs.StringSliceVar(&f.Namespaces, "namespace", f.Namespaces,
		"watch the namespaced kinds in this `namespace` only, or in several: a,b,c (or the flag given again); none: every namespace")
	fs.StringVar(&f.MemoryLimit, "memory-limit", f.MemoryLimit,
		"the Go memory limit: auto (90% of the container's memory limit, unless GOMEMLIMIT is set), off (leave it as it is), or a `quantity` such as 400Mi")
	fs.StringVar(&f.EncodedUnder, "encoded-cache-under", f.EncodedUnder,
		"keep informers' caches encoded (about half the memory, each read decodes) when the Go memory limit is under this `quantity`, such as 512Mi; 0: never")
	fs.BoolVar(&f.WaitForKinds, "wait-for-kinds", f.WaitForKinds,
		"wait for custom kinds whose CRD is not installed (their controllers run once it is) instead of failing at the start")
}

// Validate checks every flag without I/O or side effects.
func (f *Flags) Validate() error {
	if err := f.Logging.validate(); err != nil {
		return err
	}
	if err := f.LeaderElection.validate(); err != nil {
		return err
	}
	if err := f.Sharding.validate(); err != nil {
		return err
	}
	if f.Sharding.Enabled && f.LeaderElection.Enabled {
		return Usagef("--shard and --leader-elect: give one of them (sharding replaces leader election: every replica works, each on its share)")
	}
	if _, err := f.Serving.secureOptions(); err != nil {
		return err
	}
	if _, _, err := f.Serving.addrs(); err != nil {
		return err
	}
	if _, err := f.Serving.debugAddr(); err != nil {
		return err
	}
	if err := f.Serving.traceEndpoint(); err != nil {
		return err
	}
	if _, err := f.Serving.webhookAddr(); err != nil {
		return err
	}
	if _, err := f.Serving.selfSignedOptions(); err != nil {
		return err
	}
	if _, err := parseMemoryLimit(f.MemoryLimit); err != nil {
		return err
	}
	if _, err := parseEncodedUnder(f.EncodedUnder); err != nil {
		return err
	}
	for _, ns := range f.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return &FlagError{Flag: "--namespace", Value: strings.Join(f.Namespaces, ","), Want: "namespace names separated by commas: " + strconv.Quote(ns) + " is not one: " + strings.Join(errs, "; ")}
		}
	}
	return f.Cluster.validate()
}

// Config is the one call a command's RunE makes: it validates every flag
// (a bad one is a *FlagError), sets the logger up (Logging.Setup), loads
// the client configuration (the Cluster group) and returns it with the
// Options for kloop.New: Name, Namespace or Namespaces, Logger,
// MetricsAddr, HealthAddr, SecureMetrics, DebugAddr, Traces (package otlp's, when
// --trace-endpoint or the OTEL_* environment asks for traces), the Webhook options,
// LeaderElection, Sharding, MemoryLimit, Memory.EncodedUnder and WaitForKinds filled in. The
// command sets the rest (Scheme, ...) before calling kloop.New.
func (f *Flags) Config(cmd *cobra.Command) (*rest.Config, kloop.Options, error) {
	if err := f.Validate(); err != nil {
		return nil, kloop.Options{}, err
	}
	log, err := f.Logging.Setup(cmd)
	if err != nil {
		return nil, kloop.Options{}, err
	}
	le, _ := f.LeaderElection.options()
	sh, _ := f.Sharding.options()
	metrics, health, _ := f.Serving.addrs()
	debugAddr, _ := f.Serving.debugAddr()
	sec, _ := f.Serving.secureOptions()
	webhookAddr, _ := f.Serving.webhookAddr()
	selfSigned, _ := f.Serving.selfSignedOptions()
	memoryLimit, _ := parseMemoryLimit(f.MemoryLimit)
	encodedUnder, _ := parseEncodedUnder(f.EncodedUnder)
	cfg, err := f.Cluster.restConfig()
	if err != nil {
		return nil, kloop.Options{}, err
	}
	var namespace string
	namespaces := f.Namespaces
	if len(namespaces) == 1 {
		namespace, namespaces = namespaces[0], nil
	}
	opts := kloop.Options{
		Name:              f.Name,
		Namespace:         namespace,
		Namespaces:        namespaces,
		Logger:            log,
		MetricsAddr:       metrics,
		HealthAddr:        health,
		SecureMetrics:     sec,
		DebugAddr:         debugAddr,
		WebhookAddr:       webhookAddr,
		WebhookCertDir:    f.Serving.WebhookCertDir,
		WebhookLocal:      f.Serving.WebhookLocal,
		WebhookSelfSigned: selfSigned,
		LeaderElection:    le,
		Sharding:          sh,
		MemoryLimit:       memoryLimit,
		Memory:            informer.Memory{EncodedUnder: encodedUnder},
		WaitForKinds:      f.WaitForKinds,
	}
	// A command built with cli links the exporter, to offer
	// --trace-endpoint; it makes one only when asked (the flag or the
	// OTEL_* environment), with kloop's registry (the App's default).
	if opts.Traces, err = otlp.New(opts, f.Serving.TraceEndpoint); err != nil {
		return nil, kloop.Options{}, err
	}
	return cfg, opts, nil
}

// parseMemoryLimit reads --memory-limit as kloop.Options.MemoryLimit: 0
// for auto, -1 for off, else the bytes of the quantity.
func parseMemoryLimit(v string) (int64, error) {
	switch strings.ToLower(v) {
	case "", "auto":
		return 0, nil
	case "off":
		return -1, nil
	}
	q, err := resource.ParseQuantity(v)
	if n, ok := q.AsInt64(); err == nil && ok && n > 0 {
		return n, nil
	}
	return 0, &FlagError{Flag: "--memory-limit", Value: v, Want: "auto, off, or a positive quantity of bytes such as 400Mi or 1Gi"}
}

// parseEncodedUnder reads --encoded-cache-under as
// informer.Memory.EncodedUnder: 0 never switches, else the bytes of the
// quantity.
func parseEncodedUnder(v string) (int64, error) {
	if v == "" || v == "0" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if n, ok := q.AsInt64(); err == nil && ok && n >= 0 {
		return n, nil
	}
	return 0, &FlagError{Flag: "--encoded-cache-under", Value: v, Want: "0 (never) or a quantity of bytes such as 512Mi or 1Gi: informers keep their cache encoded when the Go memory limit is under it"}
}
