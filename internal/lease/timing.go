package lease

import (
	"fmt"
	"time"
)

// The defaults of the timings, as in client-go and controller-runtime:
// leaderelection.DefaultLeaseDuration and the others are these.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Timing is the one declaration of how a Lease kept by renewing it is
// timed, for leader election and for sharding: the fields of
// leaderelection.Options, sharding.Options, kloop.LeaderElection,
// kloop.Sharding and cli's flags are copied into one, which defaults and
// validates them.
type Timing struct {
	// LeaseDuration is how long the others wait, after they last saw the
	// Lease change, before they take it over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the holder keeps trying to renew before it
	// gives the Lease up; less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between the starts of renewals (and of
	// attempts to acquire); less than RenewDeadline.
	RetryPeriod time.Duration
}

// TimingError says which duration of a Timing is wrong and what it must
// be; Want names the other fields by their Go names (cli turns them into
// flag names).
type TimingError struct {
	Field string // "LeaseDuration", "RenewDeadline" or "RetryPeriod"
	Value time.Duration
	Want  string
}

func (e *TimingError) Error() string {
	return fmt.Sprintf("%s %v: want %s", e.Field, e.Value, e.Want)
}

// WithDefaults returns t with each zero duration set to its default, or a
// *TimingError for the first duration that is wrong: negative, out of
// order (RetryPeriod < RenewDeadline < LeaseDuration), or, with
// wholeSeconds, a LeaseDuration that a Lease cannot hold exactly (it holds
// seconds).
func (t Timing) WithDefaults(wholeSeconds bool) (Timing, error) {
	if t.LeaseDuration == 0 {
		t.LeaseDuration = DefaultLeaseDuration
	}
	if t.RenewDeadline == 0 {
		t.RenewDeadline = DefaultRenewDeadline
	}
	if t.RetryPeriod == 0 {
		t.RetryPeriod = DefaultRetryPeriod
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"LeaseDuration", t.LeaseDuration}, {"RenewDeadline", t.RenewDeadline}, {"RetryPeriod", t.RetryPeriod}} {
		if f.v < 0 {
			return t, &TimingError{Field: f.name, Value: f.v, Want: "a positive duration such as 10s"}
		}
	}
	switch {
	case wholeSeconds && t.LeaseDuration%time.Second != 0:
		return t, &TimingError{Field: "LeaseDuration", Value: t.LeaseDuration, Want: "whole seconds (a Lease holds seconds)"}
	case t.RenewDeadline >= t.LeaseDuration:
		return t, &TimingError{Field: "RenewDeadline", Value: t.RenewDeadline, Want: fmt.Sprintf("less than LeaseDuration (%v)", t.LeaseDuration)}
	case t.RetryPeriod >= t.RenewDeadline:
		return t, &TimingError{Field: "RetryPeriod", Value: t.RetryPeriod, Want: fmt.Sprintf("less than RenewDeadline (%v)", t.RenewDeadline)}
	}
	return t, nil
}
