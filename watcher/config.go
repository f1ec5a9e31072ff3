package watcher

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// InitialListMode chooses how the reflector fetches a full snapshot (at start
// and after a 410 Gone).
type InitialListMode uint8

const (
	// InitialListAuto (the zero value) uses a streaming list and falls back
	// to a paginated LIST when it fails for any reason but a transient one
	// (connection refused, 429, 503, timeouts: those are retried after a
	// backoff) or an expired resourceVersion (retried at the latest state).
	// That covers servers without streaming lists: they reject the request
	// as invalid or unsupported, or end the stream, go silent for 30s or send
	// a change before the initial-events-end bookmark. A rejection switches
	// the reflector to paginated lists for good; the other failures only for
	// the current sync, because a restarting server looks the same.
	InitialListAuto InitialListMode = iota
	// InitialListStreaming always uses a streaming list (a WATCH with
	// sendInitialEvents=true, resourceVersionMatch=NotOlderThan) and retries
	// it with backoff when it fails. Needs Kubernetes 1.32 or later (or the
	// WatchList feature gate).
	InitialListStreaming
	// InitialListPaginated always uses a paginated LIST followed by a WATCH,
	// the classic list-then-watch.
	InitialListPaginated
)

func (m InitialListMode) String() string {
	switch m {
	case InitialListAuto:
		return "Auto"
	case InitialListStreaming:
		return "Streaming"
	case InitialListPaginated:
		return "Paginated"
	}
	return fmt.Sprintf("InitialListMode(%d)", uint8(m))
}

// Defaults applied by Options for zero fields.
const (
	DefaultPageSize        = 500
	DefaultMinWatchTimeout = WatchTimeoutFloor
	DefaultBackoffInitial  = 800 * time.Millisecond
	DefaultBackoffMax      = 30 * time.Second
	DefaultBackoffFactor   = 2.0
	DefaultBackoffJitter   = 1.0
	DefaultBackoffReset    = 2 * time.Minute
)

// WatchTimeoutFloor is the smallest MinWatchTimeout a reflector uses.
const WatchTimeoutFloor = 5 * time.Minute

// Options configures a Reflector. The zero value works: streaming list with
// fallback, pages of 500, watch timeouts of 5–10 minutes, backoff from 800ms
// to 30s, the real clock, slog.Default and metrics on metrics.Registry.
type Options struct {
	// Name identifies the reflector in logs, errors and metrics, for example
	// "configmaps". Default: the Go type of T, such as "*v1.ConfigMap".
	Name string

	// InitialList chooses streaming list, paginated LIST, or streaming with
	// fallback (the default). See InitialListMode.
	InitialList InitialListMode

	// PageSize is the LIST page size (the limit parameter).
	//
	// 0 (default) pages by 500, except that a relist at a known
	// resourceVersion asks for everything in one response, because the API
	// server's watch cache serves only unpaginated lists at a given
	// resourceVersion and a paginated one would go to etcd; once a list at
	// resourceVersion "0" came back paginated (the cache is off), every list
	// is paged. A positive value pages every list by that size. A negative
	// value never pages.
	PageSize int64

	// MinWatchTimeout is the lower bound of the timeout sent with each WATCH;
	// each watch draws its timeout uniformly from [MinWatchTimeout,
	// 2*MinWatchTimeout) so that many clients do not reconnect at once.
	// Default and floor: 5 minutes (WatchTimeoutFloor, as in client-go). A
	// smaller value is raised to the floor, with a warning in the log: every
	// watch that ends is a new request, and short timeouts across many
	// clients add up to a reconnect storm on the API server. The watch
	// timeout is not what notices a dead connection; HTTP/2 health pings do
	// (see the package documentation).
	MinWatchTimeout time.Duration

	// Backoff shapes the delays after failures. Zero fields take defaults.
	Backoff Backoff

	// Clock is the source of time for Run (timers and failure timestamps).
	// Default: the real clock. Tests can also run Run inside testing/synctest.
	Clock clock.Clock

	// Rand returns numbers in [0, 1) for backoff jitter and watch timeouts.
	// It is called only from Run's goroutine. Default: math/rand/v2.Float64.
	Rand func() float64

	// OnError, if set, is called from Run's goroutine with every error the
	// reflector meets (naming the call, wrapping its cause), before it backs off or falls back. It
	// must not block for long. LastError keeps the latest one as well.
	OnError func(error)

	// Logger receives structured logs (key "reflector" holds Name).
	// Default: slog.Default().
	Logger *slog.Logger

	// Registerer receives the reflector's Prometheus metrics. Default:
	// metrics.Registry of this module.
	Registerer prometheus.Registerer

	// ListOptions, if set, is called before every LIST and WATCH with the
	// request's options, to add parameters of its own (such as a KEP-5866
	// shardSelector). The ListerWatcher's scope (namespace, label and field
	// selectors) is applied after it, and the reflector's own fields
	// (resourceVersion, limit, continue, watch parameters) are set before
	// it and must be left alone. What it adds may change from call to call:
	// a change takes effect at the next request, which for a watch that
	// stays open means the next reconnect or relist. With it set,
	// InitialListAuto takes its snapshots with paginated LISTs, whose
	// metadata tells what the server made of the parameters (see
	// Reflector.ListMeta); a streaming list does not say.
	ListOptions func(*metav1.ListOptions)
}

// Backoff shapes the delay after a failure: the n-th consecutive failure
// waits base(n) + Jitter*rand*base(n), where base(1) = Initial and base grows
// by Factor up to Max. A failure more than ResetAfter after the previous one
// starts again from Initial. With the defaults (800ms, ×2, 30s, jitter 1.0,
// 2 minutes, as in client-go) a server that stays down is retried every 30–60s.
type Backoff struct {
	Initial    time.Duration // default 800ms
	Max        time.Duration // cap of the base delay; default 30s
	Factor     float64       // default 2
	Jitter     float64       // default 1.0; negative means none
	ResetAfter time.Duration // default 2m
}

// resolved is Options with defaults filled in, in one place.
type resolved struct {
	name            string
	mode            InitialListMode
	pageSize        int64
	minWatchTimeout time.Duration
	// raisedWatchTimeout is the MinWatchTimeout asked for when it was below
	// the floor (NewReflector warns about it), else 0.
	raisedWatchTimeout time.Duration
	backoff            Backoff
	clock              clock.Clock
	rand               func() float64
	onError            func(error)
	logger             *slog.Logger
	registerer         prometheus.Registerer
	listOptions        func(*metav1.ListOptions)
}

func (c Options) resolve(defaultName string) resolved {
	r := resolved{
		name:            c.Name,
		mode:            c.InitialList,
		pageSize:        c.PageSize,
		minWatchTimeout: c.MinWatchTimeout,
		backoff:         c.Backoff.withDefaults(),
		clock:           c.Clock,
		rand:            c.Rand,
		onError:         c.OnError,
		logger:          c.Logger,
		registerer:      c.Registerer,
		listOptions:     c.ListOptions,
	}
	if r.name == "" {
		r.name = defaultName
	}
	if r.mode > InitialListPaginated {
		r.mode = InitialListAuto
	}
	switch {
	case r.minWatchTimeout <= 0:
		r.minWatchTimeout = DefaultMinWatchTimeout
	case r.minWatchTimeout < WatchTimeoutFloor:
		r.raisedWatchTimeout = r.minWatchTimeout
		r.minWatchTimeout = WatchTimeoutFloor
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.rand == nil {
		r.rand = rand.Float64
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	return r
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoffInitial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoffMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Factor < 1 {
		b.Factor = DefaultBackoffFactor
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = DefaultBackoffJitter
	case b.Jitter < 0:
		b.Jitter = 0
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = DefaultBackoffReset
	}
	return b
}

// backoffState is the pure part of the backoff: no clock, no randomness of
// its own; both come in as arguments.
type backoffState struct {
	cfg         Backoff
	base        time.Duration // base delay of the next failure
	lastFailure time.Time
	failed      bool
}

// next returns the delay after a failure at now; r is in [0, 1).
func (b *backoffState) next(now time.Time, r float64) time.Duration {
	if !b.failed || now.Sub(b.lastFailure) >= b.cfg.ResetAfter {
		b.base = b.cfg.Initial
	}
	b.failed = true
	b.lastFailure = now
	d := b.base
	b.base = min(time.Duration(float64(b.base)*b.cfg.Factor), b.cfg.Max)
	return d + time.Duration(b.cfg.Jitter*r*float64(d))
}
