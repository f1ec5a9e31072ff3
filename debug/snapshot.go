package debug

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/internal/memlimit"
	"github.com/kloop-dev/kloop/internal/slots"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/watcher"
)

// SchemaVersion is the version of the snapshot's JSON schema. It changes
// only when a field changes meaning or goes away; new fields may appear in
// any version.
const SchemaVersion = 1

// Levels of trouble, the "level" of the snapshot and of each of its parts.
const (
	LevelOK   = "ok"
	LevelWarn = "warn"
	LevelBad  = "bad"
)

// Thresholds of the trouble rules (see the package documentation).
const (
	// StuckAfter: a key in flight, or ready and not handed out, for longer
	// than this is trouble (warn).
	StuckAfter = time.Minute
	// HandlerBacklog: a handler with more notifications waiting than this
	// is trouble (warn).
	HandlerBacklog = 1000
	// growthFloor: a queue is growing when its ready keys rose by at least
	// this many, and by half, over the window.
	growthFloor = 10
)

// snapshot is the JSON document of the snapshot endpoint. See the package
// documentation for each field's meaning.
type snapshot struct {
	Version int       `json:"version"`
	Time    time.Time `json:"time"`
	// WindowSeconds is the span the rates, windowed quantiles and trouble
	// rules look back over: up to Options.Window, less when the history
	// is shorter, 0 when there is no earlier sample.
	WindowSeconds float64 `json:"windowSeconds"`
	// Level is the worst level of any informer or controller.
	Level       string            `json:"level"`
	Manager     managerState      `json:"manager"`
	Leader      *leaderState      `json:"leader"`
	Informers   []informerState   `json:"informers"`
	Controllers []controllerState `json:"controllers"`
	// Shards has one entry per shard group this replica is a member of;
	// empty without sharding.
	Shards []shardGroup `json:"shards"`
	// Clusters has one entry per cluster of a fleet App; empty without.
	Clusters []clusterState `json:"clusters"`
	Memory   memoryState    `json:"memory"`
}

// memoryState is the process's Go memory limit and why it is what it is.
type memoryState struct {
	// GoLimitBytes is the Go memory limit now (runtime/debug.SetMemoryLimit);
	// 0 when there is none.
	GoLimitBytes int64 `json:"goLimitBytes"`
	// Why: what kloop.App.Run derived or found when it started (set from
	// the container's limit, the program's, GOMEMLIMIT, none...).
	Why string `json:"why"`
}

// shardGroup is this replica's view of its shard group: the shard table.
type shardGroup struct {
	Group    string `json:"group"`
	Identity string `json:"identity"`
	Slots    int    `json:"slots"`
	Key      string `json:"key"`
	Joined   bool   `json:"joined"`
	Blocked  bool   `json:"blocked"`
	Leaving  bool   `json:"leaving"`
	// Scope lists this replica's slots ("0-5,9"); InScope counts them.
	Scope     string          `json:"scope"`
	InScope   int             `json:"inScope"`
	Members   []shardMember   `json:"members"`
	Informers []shardInformer `json:"informers"`
	Level     string          `json:"level"`
	Trouble   []string        `json:"trouble"`
}

// shardMember is one row of the shard table.
type shardMember struct {
	Identity   string  `json:"identity"`
	Self       bool    `json:"self"`
	Live       bool    `json:"live"`
	Held       string  `json:"held"`
	HeldCount  int     `json:"heldCount"`
	Draining   string  `json:"draining"`
	Assigned   int     `json:"assigned"`
	AgeSeconds float64 `json:"ageSeconds"`
}

// shardInformer is a sharded informer and how it is filtered: "server",
// "client" or "none".
type shardInformer struct {
	Name      string `json:"name"`
	Objects   int    `json:"objects"`
	Filtering string `json:"filtering"`
}

// managerState is the manager's own state.
type managerState struct {
	Started        bool `json:"started"`
	Synced         bool `json:"synced"`
	LeaderElection bool `json:"leaderElection"`
	Electing       bool `json:"electing"`
	Leading        bool `json:"leading"`
	Stopping       bool `json:"stopping"`
}

// leaderState is the leader election's state; null without leader election.
type leaderState struct {
	Lease        string     `json:"lease"`
	Identity     string     `json:"identity"`
	Holder       string     `json:"holder"`
	Leading      bool       `json:"leading"`
	LeadingSince *time.Time `json:"leadingSince"`
	RenewedAt    *time.Time `json:"renewedAt"`
	Renewals     uint64     `json:"renewals"`
}

// informerState is one informer.
type informerState struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Scope    string `json:"scope"`
	Synced   bool   `json:"synced"`
	// State is the reflector's phase: "listing", "connecting",
	// "watching", "waiting" (backing off after Error, or waiting for its
	// kind to be served, kloop.Options.WaitForKinds) or "stopped".
	State string `json:"state"`
	// StateLevel is how the page colours State: "ok" watching, "warn"
	// syncing, listing, connecting or waiting for its kind, "bad" not
	// synced after an error or backing off after one, "plain" stopped.
	StateLevel string `json:"stateLevel"`
	// Error is the latest list/watch error, "" when healthy.
	Error   string `json:"error"`
	Objects int    `json:"objects"`
	// CacheBytes: the informer's estimate of its cached objects' heap.
	CacheBytes int64 `json:"cacheBytes"`
	// Encoded: the cache keeps objects encoded; CacheWhy says why (or,
	// under Memory.EncodedUnder, why not).
	Encoded         bool       `json:"encoded"`
	CacheWhy        string     `json:"cacheWhy"`
	ResourceVersion string     `json:"resourceVersion"`
	LastEvent       *time.Time `json:"lastEvent"`
	// Pending: events between the reflector and the cache.
	Pending  int            `json:"pending"`
	Lists    uint64         `json:"lists"`
	Watches  uint64         `json:"watches"`
	Relists  uint64         `json:"relists"`
	Errors   uint64         `json:"errors"`
	Changes  changeCounts   `json:"changes"`
	Handlers []handlerState `json:"handlers"`
	Level    string         `json:"level"`
	Trouble  []string       `json:"trouble"`
}

// changeCounts counts what the informer applied to its cache.
type changeCounts struct {
	Add                     uint64 `json:"add"`
	Update                  uint64 `json:"update"`
	Delete                  uint64 `json:"delete"`
	DeleteFinalStateUnknown uint64 `json:"deleteFinalStateUnknown"`
}

// handlerState is one registration on an informer.
type handlerState struct {
	Name    string `json:"name"`
	Pending int    `json:"pending"`
	Synced  bool   `json:"synced"`
	// Inline: called on the informer's goroutine, without a queue.
	Inline bool `json:"inline,omitempty"`
}

// controllerState is one controller and its queue.
type controllerState struct {
	Name       string          `json:"name"`
	Workers    int             `json:"workers"`
	Active     int             `json:"active"`
	Reconciles reconcileCounts `json:"reconciles"`
	// Rates are per second over the window; null when there is no
	// earlier sample to compare with.
	Rates *rates `json:"rates"`
	// Duration quantiles, over the window when it saw reconciles, else
	// over the controller's life.
	Duration     durations        `json:"duration"`
	RecentErrors []reconcileError `json:"recentErrors"`
	// RecentReconciles are the latest reconciles, failed or not, newest
	// first, with what woke each (controller.Status.Recent).
	RecentReconciles []reconcileError `json:"recentReconciles"`
	// HotLoops are the keys reconciled again and again, woken only by
	// the controller's own writes (controller.Status.HotLoops).
	HotLoops []hotLoop  `json:"hotLoops"`
	Queue    queueState `json:"queue"`
	Level    string     `json:"level"`
	Trouble  []string   `json:"trouble"`
	// Series are the samples of the last SeriesSeconds, for plots.
	Series seriesArrays `json:"series"`
}

// reconcileCounts counts reconciles by result since the controller was made.
type reconcileCounts struct {
	Total        uint64 `json:"total"`
	Success      uint64 `json:"success"`
	Error        uint64 `json:"error"`
	RequeueAfter uint64 `json:"requeueAfter"`
	Requeue      uint64 `json:"requeue"`
	Terminal     uint64 `json:"terminal"`
	Panics       uint64 `json:"panics"`
	Timeouts     uint64 `json:"timeouts"`
	// Skipped are the reconciles not run, woken only by the key's own
	// writes (controller.Status.Skipped); not in Total.
	Skipped uint64 `json:"skipped"`
}

// rates are per second.
type rates struct {
	Reconciles float64 `json:"reconciles"`
	Errors     float64 `json:"errors"`
	Adds       float64 `json:"adds"`
	Retries    float64 `json:"retries"`
}

// durations summarizes reconcile durations, in seconds.
type durations struct {
	// Count is the number of reconciles the quantiles are over.
	Count uint64 `json:"count"`
	// Window: the quantiles are over the window (else the lifetime).
	Window bool    `json:"window"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
}

// reconcileError is one reconcile, failed (recentErrors) or not
// (recentReconciles): when it started, its key, how it ended, and its
// causes as the logs write them.
type reconcileError struct {
	Time            time.Time `json:"time"`
	Key             string    `json:"key"`
	Outcome         string    `json:"outcome"`
	DurationSeconds float64   `json:"durationSeconds"`
	Error           string    `json:"error"`
	Terminal        bool      `json:"terminal"`
	Retries         int       `json:"retries"`
	Causes          []string  `json:"causes"`
	CausesTotal     int       `json:"causesTotal"`
}

// reconcileOf is r as the snapshot shows it.
func reconcileOf(r controller.Reconcile) reconcileError {
	return reconcileError{
		Time: r.Time, Key: r.Key, Outcome: r.Outcome, DurationSeconds: r.Duration.Seconds(), Error: r.Error,
		Terminal: r.Terminal, Retries: r.Retries, Causes: causeStrings(r.Causes), CausesTotal: r.CausesTotal,
	}
}

func causeStrings(cs []controller.Cause) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// hotLoop is a key woken only by its controller's own writes, again and
// again, with the causes of its latest reconcile as the logs write them.
type hotLoop struct {
	Key        string    `json:"key"`
	Reconciles int       `json:"reconciles"`
	Since      time.Time `json:"since"`
	Last       time.Time `json:"last"`
	Causes     []string  `json:"causes"`
}

// queueState is a controller's workqueue.
type queueState struct {
	Ready                 int            `json:"ready"`
	ReadyByPriority       map[string]int `json:"readyByPriority"`
	Delayed               int            `json:"delayed"`
	InFlight              int            `json:"inFlight"`
	OldestReadySeconds    float64        `json:"oldestReadySeconds"`
	LongestRunningSeconds float64        `json:"longestRunningSeconds"`
	Adds                  uint64         `json:"adds"`
	Retries               uint64         `json:"retries"`
}

// seriesArrays are parallel arrays, oldest first: the sample times (Unix
// seconds), the ready keys then, and the reconciles and failed reconciles
// per second since the sample before (the first point is 0).
type seriesArrays struct {
	Time       []float64 `json:"t"`
	Ready      []int     `json:"ready"`
	Reconciles []float64 `json:"reconciles"`
	Errors     []float64 `json:"errors"`
}

// input is what the manager's parts report at one moment: the argument of
// build. Server gathers it at request time.
type input struct {
	Time        time.Time
	Manager     manager.Status
	Leader      *leaderelection.Status
	Informers   []informer.Status
	Controllers []controller.Status
	Shards      []sharding.Status
	Clusters    []ClusterStatus
	// MemoryLimit is the Go memory limit in force; MemoryLimitSet what
	// kloop.App.Run decided about it, if MemoryLimitApplied.
	MemoryLimit        int64
	MemoryLimitSet     memlimit.Decision
	MemoryLimitApplied bool
}

// sample is the part of an input kept in the history for rates and plots.
type sample struct {
	Time        time.Time
	Controllers map[string]controllerSample
}

// controllerSample is one controller's counters at a sample.
type controllerSample struct {
	Reconciles, Failed, Adds, Retries uint64
	Ready                             int
	// Buckets are the cumulative counts of the duration histogram.
	Buckets []uint64
}

// sampleOf keeps what the history needs of in.
func sampleOf(in input) sample {
	s := sample{Time: in.Time, Controllers: make(map[string]controllerSample, len(in.Controllers))}
	for _, c := range in.Controllers {
		s.Controllers[c.Name] = controllerSample{
			Reconciles: c.Succeeded + c.Failed + c.RequeuedAfter + c.Requeued,
			Failed:     c.Failed,
			Adds:       c.Queue.Adds,
			Retries:    c.Queue.Retries,
			Ready:      c.Queue.Ready,
			Buckets:    slices.Clone(c.Duration.Buckets),
		}
	}
	return s
}

// build turns what the parts reported into the snapshot document. history
// holds earlier samples, oldest first, and may be empty; the rates compare
// in with the oldest sample no older than window, and the series span the
// last seriesSpan. build is a pure function.
func build(in input, history []sample, window, seriesSpan time.Duration) snapshot {
	s := snapshot{
		Version: SchemaVersion,
		Time:    in.Time,
		Manager: managerState{
			Started: in.Manager.Started, Synced: in.Manager.Synced, LeaderElection: in.Manager.LeaderElection,
			Electing: in.Manager.Electing, Leading: in.Manager.Leading, Stopping: in.Manager.Stopping,
		},
		Informers:   make([]informerState, 0, len(in.Informers)),
		Controllers: make([]controllerState, 0, len(in.Controllers)),
		Shards:      make([]shardGroup, 0, len(in.Shards)),
		Clusters:    make([]clusterState, 0, len(in.Clusters)),
		Level:       LevelOK,
	}
	s.Memory = buildMemory(in)
	if l := in.Leader; l != nil {
		s.Leader = &leaderState{
			Lease: l.Lease, Identity: l.Identity, Holder: l.Leader, Leading: l.Leading,
			LeadingSince: timePtr(l.LeadingSince), RenewedAt: timePtr(l.RenewedAt), Renewals: l.Renewals,
		}
	}
	var base *sample
	for i := range history {
		if h := &history[i]; h.Time.Before(in.Time) && in.Time.Sub(h.Time) <= window {
			base = h
			break
		}
	}
	if base != nil {
		s.WindowSeconds = in.Time.Sub(base.Time).Seconds()
	}
	for _, st := range in.Informers {
		inf := buildInformer(st)
		s.Level = worse(s.Level, inf.Level)
		s.Informers = append(s.Informers, inf)
	}
	for _, st := range in.Controllers {
		c := buildController(in.Time, st, base, history, seriesSpan)
		s.Level = worse(s.Level, c.Level)
		s.Controllers = append(s.Controllers, c)
	}
	for _, st := range in.Shards {
		g := buildShards(st)
		s.Level = worse(s.Level, g.Level)
		s.Shards = append(s.Shards, g)
	}
	for _, st := range in.Clusters {
		c := buildCluster(st)
		s.Level = worse(s.Level, c.Level)
		s.Clusters = append(s.Clusters, c)
	}
	return s
}

func buildShards(st sharding.Status) shardGroup {
	g := shardGroup{
		Group: st.Group, Identity: st.Identity, Slots: st.Slots, Key: st.Key.String(),
		Joined: st.Joined, Blocked: st.Blocked, Leaving: st.Leaving,
		Scope: slots.New(st.Slots, st.Scope...).String(), InScope: len(st.Scope),
		Members:   make([]shardMember, 0, len(st.Members)),
		Informers: make([]shardInformer, 0, len(st.Informers)),
		Level:     LevelOK,
		Trouble:   []string{},
	}
	trouble := func(level, format string, args ...any) {
		g.Level = worse(g.Level, level)
		g.Trouble = append(g.Trouble, fmt.Sprintf(format, args...))
	}
	switch {
	case st.Leaving:
		trouble(LevelWarn, "leaving the group")
	case !st.Joined:
		trouble(LevelBad, "not joined: its Lease is not written or not renewed in time")
	case st.Blocked:
		trouble(LevelBad, "blocked: a live member runs with another slot count or key")
	}
	for _, m := range st.Members {
		g.Members = append(g.Members, shardMember{
			Identity: m.Identity, Self: m.Self, Live: m.Live,
			Held: slots.New(st.Slots, m.Held...).String(), HeldCount: len(m.Held), Draining: slots.New(st.Slots, m.Draining...).String(),
			Assigned: m.Assigned, AgeSeconds: m.Age.Seconds(),
		})
		if !m.Live && len(m.Held) > 0 {
			trouble(LevelWarn, "member %s is not live but holds %d slots", m.Identity, len(m.Held))
		}
	}
	for _, i := range st.Informers {
		g.Informers = append(g.Informers, shardInformer(i))
	}
	return g
}

func buildMemory(in input) memoryState {
	m := memoryState{GoLimitBytes: in.MemoryLimit}
	if in.MemoryLimit == math.MaxInt64 {
		m.GoLimitBytes = 0
	}
	d := in.MemoryLimitSet
	switch {
	case !in.MemoryLimitApplied:
		m.Why = "not set by kloop.App"
	case d.Limit > 0 && d.Limit != in.MemoryLimit:
		m.Why = fmt.Sprintf("changed by the program since the start, which set %d bytes: %s", d.Limit, d.Why)
	default:
		m.Why = d.Why
	}
	return m
}

func buildInformer(st informer.Status) informerState {
	src := st.Source
	inf := informerState{
		Name:            st.Name,
		Resource:        st.Resource,
		Scope:           st.Scope.String(),
		Synced:          st.Synced,
		State:           src.Phase.String(),
		Objects:         st.Objects,
		CacheBytes:      st.CacheBytes,
		Encoded:         st.Encoded,
		CacheWhy:        st.CacheWhy,
		ResourceVersion: st.ResourceVersion,
		LastEvent:       timePtr(src.LastEvent),
		Pending:         st.Pending,
		Lists:           src.Lists,
		Watches:         src.Watches,
		Relists:         src.Snapshots,
		Errors:          src.Errors,
		Changes: changeCounts{
			Add: st.Adds, Update: st.Updates, Delete: st.Deletes, DeleteFinalStateUnknown: st.DeletesFinalStateUnknown,
		},
		Handlers: make([]handlerState, 0, len(st.Handlers)),
		Level:    LevelOK,
		Trouble:  []string{},
	}
	if inf.Resource == "" {
		inf.Resource = st.Name
	}
	if src.LastError != nil {
		inf.Error = src.LastError.Error()
	}
	trouble := func(level, format string, args ...any) {
		inf.Level = worse(inf.Level, level)
		inf.Trouble = append(inf.Trouble, fmt.Sprintf(format, args...))
	}
	var waitingForKind *kindgate.WaitingError
	inf.StateLevel = stateLevel(src.Phase)
	switch {
	case !st.Synced && inf.Error != "":
		inf.StateLevel = LevelBad
		trouble(LevelBad, "not synced: %s", inf.Error)
	case !st.Synced:
		inf.StateLevel = LevelWarn
		trouble(LevelWarn, "not synced yet")
	case errors.As(src.LastError, &waitingForKind):
		// Options.WaitForKinds: waiting is what the program asked for, and
		// the kind may yet be installed; not a failure.
		inf.StateLevel = LevelWarn
		trouble(LevelWarn, "%s", inf.Error)
	case src.Phase != watcher.PhaseWatching && inf.Error != "":
		trouble(LevelBad, "not watching (%s): %s", inf.State, inf.Error)
	case inf.Error != "":
		trouble(LevelWarn, "error: %s", inf.Error)
	}
	for _, h := range st.Handlers {
		inf.Handlers = append(inf.Handlers, handlerState(h))
		if h.Pending > HandlerBacklog {
			trouble(LevelWarn, "handler %s has %d notifications waiting", h.Name, h.Pending)
		}
	}
	return inf
}

// stateLevel is the colour of a synced informer's phase.
func stateLevel(p watcher.Phase) string {
	switch p {
	case watcher.PhaseWatching:
		return LevelOK
	case watcher.PhaseWaiting:
		return LevelBad
	case watcher.PhaseStopped:
		return "plain"
	}
	return LevelWarn
}

func buildController(now time.Time, st controller.Status, base *sample, history []sample, seriesSpan time.Duration) controllerState {
	q := st.Queue
	c := controllerState{
		Name:    st.Name,
		Workers: st.Workers,
		Active:  st.Active,
		Reconciles: reconcileCounts{
			Total:   st.Succeeded + st.Failed + st.RequeuedAfter + st.Requeued,
			Success: st.Succeeded, Error: st.Failed, RequeueAfter: st.RequeuedAfter, Requeue: st.Requeued,
			Terminal: st.Terminal, Panics: st.Panics, Timeouts: st.Timeouts,
			Skipped: st.Skipped,
		},
		RecentErrors: make([]reconcileError, 0, len(st.RecentErrors)),
		Queue: queueState{
			Ready:                 q.Ready,
			ReadyByPriority:       map[string]int{},
			Delayed:               q.Delayed,
			InFlight:              q.InFlight,
			OldestReadySeconds:    q.OldestReady.Seconds(),
			LongestRunningSeconds: q.LongestRunning.Seconds(),
			Adds:                  q.Adds,
			Retries:               q.Retries,
		},
		Level:   LevelOK,
		Trouble: []string{},
	}
	for p, n := range q.ReadyByPriority {
		c.Queue.ReadyByPriority[strconv.Itoa(p)] = n
	}
	for _, e := range st.RecentErrors {
		c.RecentErrors = append(c.RecentErrors, reconcileOf(e))
	}
	c.RecentReconciles = make([]reconcileError, 0, len(st.Recent))
	for _, r := range st.Recent {
		c.RecentReconciles = append(c.RecentReconciles, reconcileOf(r))
	}
	c.HotLoops = make([]hotLoop, 0, len(st.HotLoops))
	for _, h := range st.HotLoops {
		c.HotLoops = append(c.HotLoops, hotLoop{Key: h.Key, Reconciles: h.Reconciles, Since: h.Since, Last: h.Last, Causes: causeStrings(h.Causes)})
	}
	trouble := func(level, format string, args ...any) {
		c.Level = worse(c.Level, level)
		c.Trouble = append(c.Trouble, fmt.Sprintf(format, args...))
	}

	c.Duration = durations{Count: st.Duration.Count}
	c.Duration.P50 = quantile(0.5, st.Duration.UpperBounds, st.Duration.Buckets)
	c.Duration.P99 = quantile(0.99, st.Duration.UpperBounds, st.Duration.Buckets)

	var old controllerSample
	var haveOld bool
	if base != nil {
		old, haveOld = base.Controllers[st.Name]
	}
	if haveOld && old.Reconciles <= c.Reconciles.Total {
		dt := now.Sub(base.Time).Seconds()
		c.Rates = &rates{
			Reconciles: float64(c.Reconciles.Total-old.Reconciles) / dt,
			Errors:     rate(st.Failed, old.Failed, dt),
			Adds:       rate(q.Adds, old.Adds, dt),
			Retries:    rate(q.Retries, old.Retries, dt),
		}
		if d, ok := delta(st.Duration.Buckets, old.Buckets); ok && d[len(d)-1] > 0 {
			c.Duration = durations{
				Count:  d[len(d)-1],
				Window: true,
				P50:    quantile(0.5, st.Duration.UpperBounds, d),
				P99:    quantile(0.99, st.Duration.UpperBounds, d),
			}
		}
		failed, total := st.Failed-min(old.Failed, st.Failed), c.Reconciles.Total-old.Reconciles
		switch {
		case failed > 0 && failed*2 >= total:
			trouble(LevelBad, "%d of %d reconciles failed in the last %s", failed, total, round(now.Sub(base.Time)))
		case failed > 0:
			trouble(LevelWarn, "%d of %d reconciles failed in the last %s", failed, total, round(now.Sub(base.Time)))
		}
		if grew := q.Ready - old.Ready; grew >= growthFloor && q.Ready*2 >= old.Ready*3 {
			trouble(LevelWarn, "queue growing: %d ready keys, %d more than %s ago", q.Ready, grew, round(now.Sub(base.Time)))
		}
	}
	if n := len(st.HotLoops); n > 0 {
		trouble(LevelWarn, "%d key(s) in a hot loop, woken only by the controller's own writes: %s", n, st.HotLoops[0].Key)
	}
	if q.OldestReady > StuckAfter {
		trouble(LevelWarn, "a ready key has waited %s", round(q.OldestReady))
	}
	if q.LongestRunning > StuckAfter {
		trouble(LevelWarn, "a reconcile has run for %s", round(q.LongestRunning))
	}
	c.Series = series(now, st, history, seriesSpan)
	return c
}

// series are the controller's points over the last span, the current
// state included.
func series(now time.Time, st controller.Status, history []sample, span time.Duration) seriesArrays {
	var s seriesArrays
	var prev *controllerSample
	var prevT time.Time
	add := func(t time.Time, cs controllerSample) {
		r, e := 0.0, 0.0
		if prev != nil && t.After(prevT) && cs.Reconciles >= prev.Reconciles {
			dt := t.Sub(prevT).Seconds()
			r = float64(cs.Reconciles-prev.Reconciles) / dt
			e = rate(cs.Failed, prev.Failed, dt)
		}
		s.Time = append(s.Time, float64(t.UnixMilli())/1000)
		s.Ready = append(s.Ready, cs.Ready)
		s.Reconciles = append(s.Reconciles, r)
		s.Errors = append(s.Errors, e)
		prev, prevT = &cs, t
	}
	for _, h := range history {
		cs, ok := h.Controllers[st.Name]
		if !ok || now.Sub(h.Time) > span || !h.Time.Before(now) {
			continue
		}
		add(h.Time, cs)
	}
	add(now, controllerSample{
		Reconciles: st.Succeeded + st.Failed + st.RequeuedAfter + st.Requeued,
		Failed:     st.Failed,
		Ready:      st.Queue.Ready,
	})
	return s
}

// quantile estimates the q-quantile of a cumulative histogram the way
// Prometheus's histogram_quantile does: linearly within the bucket that
// holds it, the first bucket starting at 0; in the +Inf bucket it is the
// largest finite bound. 0 when the histogram is empty.
func quantile(q float64, bounds []float64, cum []uint64) float64 {
	if len(cum) == 0 || len(cum) != len(bounds) {
		return 0
	}
	total := cum[len(cum)-1]
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	for i, n := range cum {
		if float64(n) < rank {
			continue
		}
		if math.IsInf(bounds[i], 1) {
			if i == 0 {
				return 0
			}
			return bounds[i-1]
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = bounds[i-1], cum[i-1]
		}
		in := n - below
		if in == 0 {
			return bounds[i]
		}
		return lo + (bounds[i]-lo)*(rank-float64(below))/float64(in)
	}
	return bounds[len(bounds)-1]
}

// delta is now−then bucket by bucket, and false when the layouts differ or
// a count went down (a reset).
func delta(now, then []uint64) ([]uint64, bool) {
	if len(now) == 0 || len(now) != len(then) {
		return nil, false
	}
	d := make([]uint64, len(now))
	for i := range now {
		if now[i] < then[i] {
			return nil, false
		}
		d[i] = now[i] - then[i]
	}
	return d, true
}

func rate(now, then uint64, dt float64) float64 {
	if now < then || dt <= 0 {
		return 0
	}
	return float64(now-then) / dt
}

func worse(a, b string) string {
	rank := map[string]int{LevelOK: 0, LevelWarn: 1, LevelBad: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }
