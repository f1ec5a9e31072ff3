package cli

import (
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// The groups' conversions are Flags.Config's steps; the tests check each
// under these names.

var (
	NewCluster = newCluster
	IsUsage    = isUsage
)

func (c *Cluster) AddFlags(fs *pflag.FlagSet)                     { c.addFlags(fs) }
func (c *Cluster) RESTConfig() (*rest.Config, error)              { return c.restConfig() }
func (l *LeaderElection) Options() (*kloop.LeaderElection, error) { return l.options() }
func (s *Sharding) Options() (*kloop.Sharding, error)             { return s.options() }
func (s *Serving) Addrs() (metrics, health string, err error)     { return s.addrs() }
func (s *Serving) Debug() (string, error)                         { return s.debugAddr() }
func (s *Serving) Secure() (*secure.Options, error)               { return s.secureOptions() }

func (l *Logging) SlogLevel() (slog.Level, error) { return l.slogLevel() }
