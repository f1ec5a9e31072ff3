package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// work is what a child's controller spent its workers' time on: its
// syncs, and (kloop, with -diagnose) the part of them spent waiting for
// its cache to catch up with its own writes.
type work struct {
	mu                sync.Mutex
	syncs             int64
	busy              time.Duration
	waits             int64
	waited            time.Duration
	reg               *prometheus.Registry // kloop's: syncs and busy come from its reconcile histogram
	reconcileTimeName string
	idle              func() bool // nothing queued, no sync running
	settled           time.Duration
}

// settle waits until the controller has been idle for half a second
// (checked every 100 ms), for at most a minute: at convergence it may
// still be working through syncs its last writes caused, whose garbage
// and bookkeeping are not what it retains.
func (w *work) settle() {
	began := time.Now()
	for quiet := 0; quiet < 5 && time.Since(began) < time.Minute; {
		time.Sleep(100 * time.Millisecond)
		if w.idle() {
			quiet++
		} else {
			quiet = 0
		}
	}
	w.settled = time.Since(began)
}

// gauges sums the values of the named gauges in reg.
func gauges(reg *prometheus.Registry, names ...string) float64 {
	fams, err := reg.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, f := range fams {
		for _, n := range names {
			if f.GetName() == n {
				for _, m := range f.GetMetric() {
					sum += m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

func (w *work) sync(d time.Duration) {
	w.mu.Lock()
	w.syncs++
	w.busy += d
	w.mu.Unlock()
}

func (w *work) String() string {
	if w.reg != nil {
		if fams, err := w.reg.Gather(); err == nil {
			for _, f := range fams {
				if f.GetName() != w.reconcileTimeName {
					continue
				}
				var n uint64
				var sum float64
				for _, m := range f.GetMetric() {
					n += m.GetHistogram().GetSampleCount()
					sum += m.GetHistogram().GetSampleSum()
				}
				w.mu.Lock()
				w.syncs, w.busy = int64(n), time.Duration(sum*float64(time.Second))
				w.mu.Unlock()
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	mean := 0.0
	if w.syncs > 0 {
		mean = w.busy.Seconds() * 1000 / float64(w.syncs)
	}
	s := fmt.Sprintf("syncs=%d busy=%.2fs mean=%.1fms settled-after=%.1fs", w.syncs, w.busy.Seconds(), mean, w.settled.Seconds())
	if w.waits > 0 {
		s += fmt.Sprintf(" own-write-waits=%d waited=%.2fs", w.waits, w.waited.Seconds())
	}
	return s
}

// waitCounter is a slog handler that sums the waits kloop's cached
// readers log at debug level ("cache caught up with own write", with
// "waited") and drops everything else.
type waitCounter struct{ w *work }

func (h waitCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h waitCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "cache caught up with own write" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "waited" {
			h.w.mu.Lock()
			h.w.waits++
			h.w.waited += a.Value.Duration()
			h.w.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}
func (h waitCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h waitCounter) WithGroup(string) slog.Handler      { return h }
