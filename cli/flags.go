package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
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
}

// NewFlags returns kloop's defaults for the program name: client-go's
// kubeconfig loading rules, no client-side throttling, no leader
// election, no sharding, no HTTP server, info logs as text.
func NewFlags(name string) *Flags {
	return &Flags{
		Name:           name,
		Cluster:        NewCluster(),
		LeaderElection: NewLeaderElection(name),
		Sharding:       NewSharding(name),
		Serving:        NewServing(),
		Logging:        NewLogging(),
	}
}

// AddFlags registers every group's flags on fs, with f's fields as
// defaults. Register on cmd.Flags() for the command alone, or on
// cmd.PersistentFlags() to have its subcommands take them too.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	f.Cluster.AddFlags(fs)
	f.LeaderElection.AddFlags(fs)
	f.Sharding.AddFlags(fs)
	f.Serving.AddFlags(fs)
	f.Logging.AddFlags(fs)
}

// Validate checks every flag without I/O or side effects.
func (f *Flags) Validate() error {
	if err := f.Logging.Validate(); err != nil {
		return err
	}
	if err := f.LeaderElection.Validate(); err != nil {
		return err
	}
	if err := f.Sharding.Validate(); err != nil {
		return err
	}
	if f.Sharding.Enabled && f.LeaderElection.Enabled {
		return Usagef("--shard and --leader-elect: give one of them (sharding replaces leader election: every replica works, each on its share)")
	}
	if _, err := f.Serving.Secure(); err != nil {
		return err
	}
	if _, _, err := f.Serving.Addrs(); err != nil {
		return err
	}
	if _, err := f.Serving.Debug(); err != nil {
		return err
	}
	if _, err := f.Serving.Webhook(); err != nil {
		return err
	}
	if _, err := f.Serving.SelfSigned(); err != nil {
		return err
	}
	return f.Cluster.Validate()
}

// Config is the one call a command's RunE makes: it validates every flag
// (a bad one is a *FlagError), sets the logger up (Logging.Setup), loads
// the client configuration (Cluster.RESTConfig) and returns it with the
// Options for kloop.New: Name, Logger, MetricsAddr, HealthAddr,
// SecureMetrics, DebugAddr, the Webhook options, LeaderElection and
// Sharding filled in. The
// command sets the rest (Scheme, Namespace, ...) before calling kloop.New.
func (f *Flags) Config(cmd *cobra.Command) (*rest.Config, kloop.Options, error) {
	if err := f.Validate(); err != nil {
		return nil, kloop.Options{}, err
	}
	log, err := f.Logging.Setup(cmd)
	if err != nil {
		return nil, kloop.Options{}, err
	}
	le, _ := f.LeaderElection.Options()
	sh, _ := f.Sharding.Options()
	metrics, health, _ := f.Serving.Addrs()
	debugAddr, _ := f.Serving.Debug()
	sec, _ := f.Serving.Secure()
	webhookAddr, _ := f.Serving.Webhook()
	selfSigned, _ := f.Serving.SelfSigned()
	cfg, err := f.Cluster.RESTConfig()
	if err != nil {
		return nil, kloop.Options{}, err
	}
	return cfg, kloop.Options{
		Name:              f.Name,
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
	}, nil
}
