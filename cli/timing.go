package cli

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kloop-dev/kloop/internal/lease"
)

// timingFlags are the three timings of a Lease kept by renewing it, as
// flags named prefix + "lease-duration", "renew-deadline" and
// "retry-period": --leader-elect-… and --shard-… are defined here, once.
type timingFlags struct {
	prefix string // "leader-elect-" or "shard-"
	// What each flag's help says, in the words of its user.
	leaseHelp, renewHelp, retryHelp string
}

// add registers the three flags on fs, with the fields' values as
// defaults.
func (f timingFlags) add(fs *pflag.FlagSet, leaseDuration, renewDeadline, retryPeriod *time.Duration) {
	fs.DurationVar(leaseDuration, f.prefix+"lease-duration", *leaseDuration, f.leaseHelp)
	fs.DurationVar(renewDeadline, f.prefix+"renew-deadline", *renewDeadline,
		f.renewHelp+"; less than --"+f.prefix+"lease-duration")
	fs.DurationVar(retryPeriod, f.prefix+"retry-period", *retryPeriod,
		f.retryHelp+"; less than --"+f.prefix+"renew-deadline")
}

// check validates the three values with the rules lease.Timing declares,
// as a FlagError that names the flags. A flag given as zero (or less) is
// a mistake here, not a request for the default.
func (f timingFlags) check(t lease.Timing, wholeSeconds bool) error {
	flag := strings.NewReplacer("LeaseDuration", "--"+f.prefix+"lease-duration",
		"RenewDeadline", "--"+f.prefix+"renew-deadline", "RetryPeriod", "--"+f.prefix+"retry-period")
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"LeaseDuration", t.LeaseDuration}, {"RenewDeadline", t.RenewDeadline}, {"RetryPeriod", t.RetryPeriod}} {
		if d.v <= 0 {
			return &FlagError{Flag: flag.Replace(d.field), Value: d.v.String(), Want: "want a positive duration such as 10s"}
		}
	}
	if _, err := t.WithDefaults(wholeSeconds); err != nil {
		e := err.(*lease.TimingError)
		return &FlagError{Flag: flag.Replace(e.Field), Value: e.Value.String(), Want: "want " + flag.Replace(e.Want)}
	}
	return nil
}
