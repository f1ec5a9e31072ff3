package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/lease"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/sharding"
)

// Sharding is --shard and its group: --shard-group, --shard-key,
// --shard-slots, --shard-namespace, the three Lease timings (the defaults
// of leader election) and --shard-client-side-only. It fills
// kloop.Options.Sharding, which splits the controllers' objects between the
// replicas instead of electing one leader. The fields hold the flag
// defaults until the flags are parsed.
type Sharding struct {
	Enabled bool
	// Group names the replicas that share the work; a DNS label.
	Group string
	// Key is "namespace" (sharding.ByNamespace) or "uid" (ByUID).
	Key   string
	Slots int
	// Namespace of the members' Leases; "" leaves it to kloop.New (the
	// App's namespace, else the pod's own in a cluster).
	Namespace      string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	ClientSideOnly bool
}

// newSharding returns the defaults for the program name: off, the group
// named after the program, by namespace, 64 slots and the timings of
// leader election (leaderelection.DefaultLeaseDuration and the others).
func newSharding(name string) Sharding {
	return Sharding{
		Group:         name,
		Key:           sharding.ByNamespace.String(),
		Slots:         sharding.DefaultSlots,
		LeaseDuration: leaderelection.DefaultLeaseDuration,
		RenewDeadline: leaderelection.DefaultRenewDeadline,
		RetryPeriod:   leaderelection.DefaultRetryPeriod,
	}
}

// addFlags registers the flags on fs, with s's fields as defaults.
func (s *Sharding) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Enabled, "shard", s.Enabled,
		"split the controllers' objects between the replicas of --shard-group, each caching and reconciling its share, instead of electing one leader; not with --leader-elect")
	fs.StringVar(&s.Group, "shard-group", s.Group, "name of the replicas that share the work (a DNS label); every replica of a group gives the same --shard-group, --shard-key and --shard-slots")
	fs.StringVar(&s.Key, "shard-key", s.Key,
		"what places an object in a shard: namespace (an object and those it owns stay together) or uid (the most even spread, only the controllers' primary kinds are sharded)")
	fs.IntVar(&s.Slots, "shard-slots", s.Slots, "number of parts the work is cut into, the unit of handover (1 to 4096)")
	fs.StringVar(&s.Namespace, "shard-namespace", s.Namespace,
		"namespace of the replicas' Leases (default: the namespace the command watches, else its pod's own namespace in a cluster)")
	shardTimingFlags.add(fs, &s.LeaseDuration, &s.RenewDeadline, &s.RetryPeriod)
	fs.BoolVar(&s.ClientSideOnly, "shard-client-side-only", s.ClientSideOnly,
		"send no shard selector to the API server: receive every object and keep this replica's share (for servers without sharded list and watch that reject it)")
}

var shardTimingFlags = timingFlags{
	prefix:    "shard-",
	leaseHelp: "how long the others wait after a replica's Lease was last renewed before they take its share (whole seconds)",
	renewHelp: "how long a replica keeps trying to renew its Lease before it gives its share up",
	retryHelp: "interval between renewals of a replica's Lease",
}

// validate checks the values; with Enabled false nothing is checked.
func (s *Sharding) validate() error {
	if !s.Enabled {
		return nil
	}
	if errs := validation.IsDNS1123Label(s.Group); len(errs) > 0 {
		return &FlagError{Flag: "--shard-group", Value: s.Group, Want: "not a DNS label: " + strings.Join(errs, "; ")}
	}
	if _, err := s.key(); err != nil {
		return err
	}
	if s.Slots < 1 || s.Slots > 4096 {
		return &FlagError{Flag: "--shard-slots", Value: fmt.Sprint(s.Slots), Want: "want a number from 1 to 4096"}
	}
	if s.Namespace != "" {
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return &FlagError{Flag: "--shard-namespace", Value: s.Namespace, Want: "not a namespace name: " + strings.Join(errs, "; ")}
		}
	}
	return shardTimingFlags.check(lease.Timing{LeaseDuration: s.LeaseDuration, RenewDeadline: s.RenewDeadline, RetryPeriod: s.RetryPeriod}, true)
}

func (s *Sharding) key() (sharding.Key, error) {
	for _, k := range []sharding.Key{sharding.ByNamespace, sharding.ByUID} {
		if s.Key == k.String() {
			return k, nil
		}
	}
	return 0, &FlagError{Flag: "--shard-key", Value: s.Key, Want: "want namespace or uid"}
}

// options validates s and returns kloop's sharding, or nil when Enabled is
// false.
func (s *Sharding) options() (*kloop.Sharding, error) {
	if err := s.validate(); err != nil || !s.Enabled {
		return nil, err
	}
	key, _ := s.key()
	return &kloop.Sharding{
		Group:          s.Group,
		Key:            key,
		Slots:          s.Slots,
		Namespace:      s.Namespace,
		LeaseDuration:  s.LeaseDuration,
		RenewDeadline:  s.RenewDeadline,
		RetryPeriod:    s.RetryPeriod,
		ClientSideOnly: s.ClientSideOnly,
	}, nil
}
