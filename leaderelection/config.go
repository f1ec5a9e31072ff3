package leaderelection

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/kloop-dev/kloop/internal/lease"
)

// Defaults, as in client-go and controller-runtime. Sharding, the App's
// options and the cli flags default to them too; they, and the rules the
// three timings follow, are declared once, in internal/lease's Timing.
const (
	DefaultLeaseDuration = lease.DefaultLeaseDuration
	DefaultRenewDeadline = lease.DefaultRenewDeadline
	DefaultRetryPeriod   = lease.DefaultRetryPeriod
)

// Sentinel errors; test with errors.Is.
var (
	// ErrLeadershipLost: Run returns it (wrapping the last renewal error)
	// when the lease could not be renewed within RenewDeadline. Another
	// candidate may lead now; the usual reaction is to exit the process.
	ErrLeadershipLost = errors.New("leaderelection: leadership lost")

	// ErrAlreadyRunning: Run was called while another Run of the same
	// Elector had not returned.
	ErrAlreadyRunning = errors.New("leaderelection: elector is already running")

	// ErrInvalidConfig: New was given Options that fail validation.
	ErrInvalidConfig = errors.New("leaderelection: invalid config")
)

// Options configure an Elector. Namespace and Name are required; every other zero value takes the documented default.
type Options struct {
	// Namespace and Name of the coordination.k8s.io/v1 Lease to compete for.
	// Every candidate of one election uses the same pair. Required.
	Namespace, Name string

	// Identity names this candidate in the lease. Candidates must have
	// distinct identities. Default: the host name, an underscore and 8
	// random hex digits, unique per Elector.
	Identity string

	// LeaseDuration is how long a candidate that is not leading waits,
	// after it last saw the lease change, before it takes the lease over.
	// It is written into the lease (rounded up to whole seconds) for others
	// to use. Default 15s.
	LeaseDuration time.Duration

	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives leadership up: it stops leading when RenewDeadline has passed
	// since the start of its last successful renewal. Must be less than
	// LeaseDuration; the difference is the time the leader's work has to
	// stop (see the package documentation on fencing). Default 10s.
	RenewDeadline time.Duration

	// RetryPeriod is the interval between the starts of attempts: the
	// leader's renewals, and a candidate's attempts to acquire (shortened
	// by up to 20% at random, so that candidates spread out, never
	// lengthened). A candidate also tries at the moment the lease it waits
	// for expires, so it takes over within LeaseDuration + RetryPeriod of
	// the holder's last renewal, plus the latency of a read and a write.
	// Must be less than RenewDeadline. Default 2s.
	RetryPeriod time.Duration

	// KeepLeaseOnCancel leaves the lease held when Run's context is
	// cancelled, so other candidates must wait LeaseDuration to take over.
	// Default false: Run releases the lease once the leader's work has
	// returned, and a waiting candidate takes over at its next attempt.
	KeepLeaseOnCancel bool

	// OnStoppedLeading, if set, is called once after the leader's work
	// returned and the lease was released (or given up), from Run's
	// goroutine. It is not called when this candidate never led.
	OnStoppedLeading func()

	// OnNewLeader, if set, is called from Run's goroutine whenever the
	// observed holder of the lease changes, including to this candidate
	// and to "" (released). It must return quickly: renewals wait for it.
	OnNewLeader func(identity string)

	// Clock is the source of time for timers and lease timestamps.
	// Default: the real clock. Run also works inside testing/synctest.
	Clock clock.Clock

	// Logger receives structured logs (key "lease" is namespace/name).
	// Default: slog.Default().
	Logger *slog.Logger

	// Registerer receives the elector's metrics. Default: the kloop metrics
	// registry (github.com/kloop-dev/kloop/metrics.Registry).
	Registerer prometheus.Registerer
}

// timing is c's lease timing.
func (c Options) timing() lease.Timing {
	return lease.Timing{LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod}
}

// withDefaults returns c with defaults filled in, or an error wrapping
// ErrInvalidConfig. It is the one place Options are checked.
func (c Options) withDefaults() (Options, error) {
	t, timingErr := c.timing().WithDefaults(false)
	c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = t.LeaseDuration, t.RenewDeadline, t.RetryPeriod
	if c.Identity == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "candidate"
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Identity = host + "_" + hex.EncodeToString(b[:])
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if c.Namespace == "" || c.Name == "" {
		bad("Namespace and Name of the lease are required")
	}
	if timingErr != nil {
		problems = append(problems, timingErr)
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return c, nil
}
