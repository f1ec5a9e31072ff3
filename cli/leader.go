package cli

import (
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/lease"
	"github.com/kloop-dev/kloop/leaderelection"
)

// LeaderElection is --leader-elect and its Lease: --leader-elect-namespace,
// --leader-elect-id and the three timings, with controller-runtime's
// defaults (leaderelection.DefaultLeaseDuration and the others). The fields hold the flag defaults until the
// flags are parsed.
type LeaderElection struct {
	Enabled bool
	// Namespace of the Lease; "" leaves it to kloop.New (the App's
	// namespace, else the pod's own in a cluster).
	Namespace string
	// ID is the Lease's name.
	ID            string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// newLeaderElection returns the defaults for the program name: off, a
// Lease named name + "-leader", and controller-runtime's timings.
func newLeaderElection(name string) LeaderElection {
	return LeaderElection{
		ID:            name + "-leader",
		LeaseDuration: leaderelection.DefaultLeaseDuration,
		RenewDeadline: leaderelection.DefaultRenewDeadline,
		RetryPeriod:   leaderelection.DefaultRetryPeriod,
	}
}

// addFlags registers the flags on fs, with l's fields as defaults.
func (l *LeaderElection) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&l.Enabled, "leader-elect", l.Enabled,
		"run the controllers only while this process holds a coordination.k8s.io Lease, so that one of several replicas works at a time")
	fs.StringVar(&l.Namespace, "leader-elect-namespace", l.Namespace,
		"namespace of the Lease (default: the namespace the command watches, else its pod's own namespace in a cluster)")
	fs.StringVar(&l.ID, "leader-elect-id", l.ID, "name of the Lease")
	leaderTimingFlags.add(fs, &l.LeaseDuration, &l.RenewDeadline, &l.RetryPeriod)
}

var leaderTimingFlags = timingFlags{
	prefix:    "leader-elect-",
	leaseHelp: "how long a standby waits after the Lease was last renewed before it takes over",
	renewHelp: "how long the leader keeps trying to renew before it stops leading",
	retryHelp: "interval between attempts to acquire or renew the Lease",
}

// validate checks the values; with Enabled false nothing is checked.
func (l *LeaderElection) validate() error {
	if !l.Enabled {
		return nil
	}
	if l.Namespace != "" {
		if errs := validation.IsDNS1123Label(l.Namespace); len(errs) > 0 {
			return &FlagError{Flag: "--leader-elect-namespace", Value: l.Namespace, Want: "not a namespace name: " + strings.Join(errs, "; ")}
		}
	}
	if errs := validation.IsDNS1123Subdomain(l.ID); len(errs) > 0 {
		return &FlagError{Flag: "--leader-elect-id", Value: l.ID, Want: "not a Lease name: " + strings.Join(errs, "; ")}
	}
	return leaderTimingFlags.check(lease.Timing{LeaseDuration: l.LeaseDuration, RenewDeadline: l.RenewDeadline, RetryPeriod: l.RetryPeriod}, false)
}

// options validates l and returns kloop's leader election, or nil when
// Enabled is false.
func (l *LeaderElection) options() (*kloop.LeaderElection, error) {
	if err := l.validate(); err != nil || !l.Enabled {
		return nil, err
	}
	return &kloop.LeaderElection{
		Namespace:     l.Namespace,
		ID:            l.ID,
		LeaseDuration: l.LeaseDuration,
		RenewDeadline: l.RenewDeadline,
		RetryPeriod:   l.RetryPeriod,
	}, nil
}
