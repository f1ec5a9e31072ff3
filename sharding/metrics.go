package sharding

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/kmetrics"
	"github.com/kloop-dev/kloop/metrics"
)

type memberMetrics struct {
	slots            *prometheus.GaugeVec // by state
	members          prometheus.Gauge
	handovers        *prometheus.CounterVec // by direction
	handoverDuration prometheus.ObserverVec
	renewFailures    prometheus.Counter
}

// newMemberMetrics registers the member's metrics for group on reg. The
// objects gauge reads objects() at every scrape. A registration error
// leaves working but unexported metrics.
func newMemberMetrics(reg prometheus.Registerer, group string, objects func() float64) (*memberMetrics, error) {
	var errs []error
	register := func(c prometheus.Collector) prometheus.Collector {
		got, err := kmetrics.RegisterOrGet(reg, c)
		if err != nil {
			errs = append(errs, err)
		}
		return got
	}
	labels := prometheus.Labels{"group": group}
	slots := register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "shard", Name: "slots",
		Help: "Slots of the shard group this replica holds, by state (active: owned and working; claiming, starting, releasing: in handover).",
	}, []string{"group", "state"})).(*prometheus.GaugeVec)
	members := register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "shard", Name: "members",
		Help: "Live members of the shard group, as this replica sees them.",
	}, []string{"group"})).(*prometheus.GaugeVec)
	handovers := register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "shard", Name: "handovers_total",
		Help: "Slots this replica took over (direction in) or gave up (direction out).",
	}, []string{"group", "direction"})).(*prometheus.CounterVec)
	duration := register(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kloop", Subsystem: "shard", Name: "handover_duration_seconds",
		Help:    "Handover time: in, from a slot being assigned to this replica until it starts it (waiting for the previous holder); out, from giving a slot up until its reconciles finished and its objects were dropped.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 60, 120},
	}, []string{"group", "direction"})).(*prometheus.HistogramVec)
	failures := register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "shard", Name: "lease_write_failures_total",
		Help: "Failed writes of this replica's member Lease.",
	}, []string{"group"})).(*prometheus.CounterVec)
	objs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "shard", Name: "objects",
		Help:        "Objects in this replica's sharded informers.",
		ConstLabels: labels,
	}, objects)
	if reg == nil {
		reg = metrics.Registry
	}
	if err := reg.Register(objs); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			errs = append(errs, err)
		}
	}
	return &memberMetrics{
		slots:            slots.MustCurryWith(labels),
		members:          members.WithLabelValues(group),
		handovers:        handovers.MustCurryWith(labels),
		handoverDuration: duration.MustCurryWith(labels),
		renewFailures:    failures.WithLabelValues(group),
	}, errors.Join(errs...)
}
