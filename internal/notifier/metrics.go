package notifier

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// Metric names. The first two are kubewatch's, so its dashboards keep
// working; resourceType is the object's kind.
const (
	MetricEvents     = "kubewatch_events_total"
	MetricSent       = "kubewatch_events_sent_total"
	MetricFailed     = "kubewatch_events_failed_total"
	MetricSuppressed = "kubewatch_events_suppressed_total"
	// MetricOverflowed counts the changes a sink's full queue could not
	// take at once: set aside per object and sent (merged with the
	// object's later changes, counted in MetricMerged) once it had room.
	MetricOverflowed = "kubewatch_events_overflowed_total"
	MetricMerged     = "kubewatch_events_merged_total"
	// MetricOverflowObjects is the objects a sink has set aside now.
	MetricOverflowObjects = "kubewatch_sink_overflow_objects"
	// MetricCheckpointObjects is this notifier's: the size of its
	// checkpoint.
	MetricCheckpointObjects = "kubewatch_checkpoint_objects"
)

// Reasons of MetricFailed.
const (
	failAttempts = "attempts" // retryable errors until MaxAttempts
	failRejected = "rejected" // the receiver refused (4xx but 429)
	failShutdown = "shutdown" // still queued or retrying when the drain ended
)

type notifierMetrics struct {
	events     *prometheus.CounterVec // resourceType, eventType
	sent       *prometheus.CounterVec // resourceType, eventType, sink
	failed     *prometheus.CounterVec // sink, reason
	suppressed *prometheus.CounterVec // resourceType, reason
	// overflowed, merged and overflowObjects: a sink's full queue (see
	// overflow), by sink.
	overflowed      *prometheus.CounterVec
	merged          *prometheus.CounterVec
	overflowObjects *prometheus.GaugeVec
	// checkpointObjects is the objects in the last saved checkpoint, -1
	// once it overflowed.
	checkpointObjects prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*notifierMetrics, error) {
	m := &notifierMetrics{}
	var err error
	if m.events, err = kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricEvents,
		Help: "Changes seen by the notifier's informers (the initial list excluded), before suppression and filtering.",
	}, []string{"resourceType", "eventType"})); err != nil {
		return nil, err
	}
	if m.sent, err = kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSent,
		Help: "Notifications a sink delivered.",
	}, []string{"resourceType", "eventType", "sink"})); err != nil {
		return nil, err
	}
	if m.failed, err = kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricFailed,
		Help: "Notifications a sink gave up on, by reason: attempts, rejected, shutdown (sent again after the restart).",
	}, []string{"sink", "reason"})); err != nil {
		return nil, err
	}
	if m.suppressed, err = kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSuppressed,
		Help: "Changes not notified, by reason: initial (part of the initial list), unchanged, noop, status, metadata.",
	}, []string{"resourceType", "reason"})); err != nil {
		return nil, err
	}
	if m.overflowed, err = kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricOverflowed,
		Help: "Changes a sink's full queue could not take at once: set aside per object and sent with its latest state once the queue had room.",
	}, []string{"sink"})); err != nil {
		return nil, err
	}
	if m.merged, err = kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricMerged,
		Help: "Set-aside changes merged into a later change of the same object (one notification of the latest state).",
	}, []string{"sink"})); err != nil {
		return nil, err
	}
	if m.overflowObjects, err = kmetrics.RegisterOrGet(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricOverflowObjects,
		Help: "Objects whose changes a sink has set aside, waiting for room in its queue.",
	}, []string{"sink"})); err != nil {
		return nil, err
	}
	if m.checkpointObjects, err = kmetrics.RegisterOrGet(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricCheckpointObjects,
		Help: "Objects in the notifier's last saved checkpoint; -1 once it overflowed its bound.",
	})); err != nil {
		return nil, err
	}
	return m, nil
}
