package controller

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/workqueue"
)

// RecentErrors is how many of the latest failed reconciles Status keeps.
const RecentErrors = 10

// Status is what a controller knows about itself at one moment. The counts
// are the controller_runtime_* metrics of the controller, read when Status
// is called; only the recent errors are kept for it, and only when a
// reconcile fails.
type Status struct {
	Name string
	// Workers is Options.Workers; Active is how many reconciles run now.
	Workers, Active int
	// Reconciles by result since New: success, error, requeue after,
	// requeue (Result.Requeue).
	Succeeded, Failed, RequeuedAfter, Requeued uint64
	// Of the failed: terminal errors, panics, reconcile timeouts.
	Terminal, Panics, Timeouts uint64
	// Skipped counts the reconciles not run because every cause was the
	// key's own write (Options.ReconcileOwnWrites); they are in Recent
	// with Outcome OutcomeSkipped.
	Skipped uint64
	// Duration is the histogram of reconcile durations.
	Duration Histogram
	// RecentErrors are the latest failed reconciles, newest first, at most
	// RecentErrors of them.
	RecentErrors []Reconcile
	// Recent are the latest reconciles, failed or not, newest first, at
	// most RecentReconciles of them: what woke each and how it ended.
	Recent []Reconcile
	// KeyHistory returns the latest reconciles of each key, newest first
	// (at most 5 a key), for about the 256 keys reconciled most recently
	// (each of N workers keeps the 256/N, at least 32, it reconciled most
	// recently), by key as text. It copies them when called; nil in a
	// Status not made by a Controller.
	KeyHistory func() map[string][]Reconcile
	// HotLoops are the keys reconciled again and again, woken only by the
	// program's own writes (every cause Own): at least 10 such reconciles
	// in a row within 30 s, the latest of them within the last 30 s. At
	// most 20, most reconciles first. The first time a key turns hot in
	// 10 minutes, the controller logs a warning with its causes; every
	// self-triggered reconcile counts in
	// kloop_controller_self_triggered_reconciles_total.
	HotLoops []HotLoop
	// Queue is the controller's workqueue.
	Queue workqueue.Status
}

// Histogram is a cumulative histogram as Prometheus keeps it: Buckets[i]
// counts the observations ≤ UpperBounds[i] (seconds).
type Histogram struct {
	Count       uint64
	Sum         float64
	UpperBounds []float64
	Buckets     []uint64
}

// recentErrors is a ring of the latest failures.
type recentErrors struct {
	mu   sync.Mutex
	ring [RecentErrors]Reconcile
	next int
	n    int
}

func (r *recentErrors) add(e Reconcile) {
	r.mu.Lock()
	r.ring[r.next] = e
	r.next = (r.next + 1) % len(r.ring)
	r.n = min(r.n+1, len(r.ring))
	r.mu.Unlock()
}

func (r *recentErrors) list() []Reconcile {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Reconcile, 0, r.n)
	for i := 1; i <= r.n; i++ {
		out = append(out, r.ring[(r.next-i+len(r.ring))%len(r.ring)])
	}
	return out
}

// Status reports the controller's state; see Status. It may be called from
// any goroutine, before, during and after Start.
func (c *Controller[K]) Status() Status {
	s := Status{
		Name:          c.name,
		Workers:       c.opts.Workers,
		Active:        int(kmetrics.Count(c.m.active)),
		Succeeded:     kmetrics.Count(c.m.success),
		Failed:        kmetrics.Count(c.m.failed),
		RequeuedAfter: kmetrics.Count(c.m.requeueAfter),
		Requeued:      kmetrics.Count(c.m.requeue),
		Terminal:      kmetrics.Count(c.m.terminal),
		Panics:        kmetrics.Count(c.m.panics),
		Timeouts:      kmetrics.Count(c.m.timeouts),
		Skipped:       kmetrics.Count(c.m.selfSkipped),
		RecentErrors:  c.recent.list(),
		Recent:        c.hist.list(),
		KeyHistory:    c.hist.byKey,
		HotLoops:      c.hot.list(time.Now()),
		Queue:         c.queue.Status(),
	}
	if m, ok := c.m.duration.(prometheus.Metric); ok {
		if d := kmetrics.Read(m); d != nil && d.Histogram != nil {
			h := d.Histogram
			s.Duration.Count, s.Duration.Sum = h.GetSampleCount(), h.GetSampleSum()
			for _, b := range h.GetBucket() {
				s.Duration.UpperBounds = append(s.Duration.UpperBounds, b.GetUpperBound())
				s.Duration.Buckets = append(s.Duration.Buckets, b.GetCumulativeCount())
			}
		}
	}
	return s
}

// keyString is a key as text, as Status shows it.
func keyString[K comparable](key K) string {
	switch k := any(key).(type) {
	case cache.Key:
		return k.String()
	case fmt.Stringer:
		return k.String()
	case string:
		return k
	default:
		return fmt.Sprint(key)
	}
}
