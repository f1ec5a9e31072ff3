package controller

import (
	"cmp"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// The controller metrics carry controller-runtime's names, labels and
// buckets, so dashboards and alerts written for controller-runtime work on
// kloop controllers unchanged.
const (
	resultSuccess      = "success"
	resultError        = "error"
	resultRequeueAfter = "requeue_after"
	// resultRequeue is controller-runtime's label for Result{Requeue: true}.
	resultRequeue = "requeue"
)

var reconcileTimeBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
	0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20,
	25, 30, 40, 50, 60}

// controllerMetrics holds one controller's children of the shared families.
type controllerMetrics struct {
	success, failed, requeueAfter prometheus.Counter
	requeue                       prometheus.Counter
	errors, terminal, panics      prometheus.Counter
	timeouts, skipped             prometheus.Counter
	selfTriggered, selfSkipped    prometheus.Counter
	duration                      prometheus.Observer
	active, workers               prometheus.Gauge
}

func newControllerMetrics(name string, reg prometheus.Registerer) (*controllerMetrics, error) {
	r := kmetrics.NewRegistrar(reg)
	counter := func(metric, help string, labels ...string) *prometheus.CounterVec {
		return r.CounterVec(prometheus.CounterOpts{Name: metric, Help: help}, labels...)
	}
	gauge := func(metric, help string) *prometheus.GaugeVec {
		return r.GaugeVec(prometheus.GaugeOpts{Name: metric, Help: help}, "controller")
	}
	total := counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller", "controller", "result")
	errs := counter("controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller", "controller")
	terminal := counter("controller_runtime_terminal_reconcile_errors_total", "Total number of terminal reconciliation errors per controller", "controller")
	panics := counter("controller_runtime_reconcile_panics_total", "Total number of reconciliation panics per controller", "controller")
	timeouts := counter("controller_runtime_reconcile_timeouts_total", "Total number of reconciliations that hit the per-reconcile timeout per controller", "controller")
	// Every worker observes it once per reconcile: its children are
	// sharded by core (kmetrics.HistogramVec).
	duration, err := kmetrics.RegisterHistogramVec(reg, kmetrics.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            "controller_runtime_reconcile_time_seconds",
		Help:                            "Length of time per reconciliation per controller",
		Buckets:                         reconcileTimeBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"controller"}))
	skipped := counter("kloop_controller_keys_not_admitted_total", "Keys dropped unreconciled because the controller was restricted away from them (see Controller.Restrict), per controller", "controller")
	self := counter("kloop_controller_self_triggered_reconciles_total", "Reconciles woken only by the program's own writes (every cause was its own write), per controller; a steady rate on one key is a hot loop", "controller")
	selfSkipped := counter("kloop_controller_skipped_reconciles_total", "Reconciles skipped because every cause was the watch event of a write the key's own reconciles made (see Options.ReconcileOwnWrites), per controller", "controller")
	workers := gauge("controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller")
	active := gauge("controller_runtime_active_workers", "Number of currently used workers per controller")
	if err := cmp.Or(r.Err(), err); err != nil {
		return nil, fmt.Errorf("registering controller metrics: %w", err)
	}
	m := &controllerMetrics{
		success:       total.WithLabelValues(name, resultSuccess),
		failed:        total.WithLabelValues(name, resultError),
		requeueAfter:  total.WithLabelValues(name, resultRequeueAfter),
		requeue:       total.WithLabelValues(name, resultRequeue),
		errors:        errs.WithLabelValues(name),
		terminal:      terminal.WithLabelValues(name),
		panics:        panics.WithLabelValues(name),
		timeouts:      timeouts.WithLabelValues(name),
		skipped:       skipped.WithLabelValues(name),
		selfTriggered: self.WithLabelValues(name),
		selfSkipped:   selfSkipped.WithLabelValues(name),
		duration:      duration.WithLabelValues(name),
		active:        active.WithLabelValues(name),
		workers:       workers.WithLabelValues(name),
	}
	return m, nil
}
