package notifier

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/metrics"
)

// Metric names. The first two are kubewatch's, so its dashboards keep
// working; resourceType is the object's kind.
const (
	MetricEvents     = "kubewatch_events_total"
	MetricSent       = "kubewatch_events_sent_total"
	MetricFailed     = "kubewatch_events_failed_total"
	MetricSuppressed = "kubewatch_events_suppressed_total"
	// MetricCheckpointObjects is this notifier's: the size of its
	// checkpoint.
	MetricCheckpointObjects = "kubewatch_checkpoint_objects"
)

// Reasons of MetricFailed.
const (
	failAttempts = "attempts"   // retryable errors until MaxAttempts
	failRejected = "rejected"   // the receiver refused (4xx but 429)
	failQueue    = "queue_full" // the sink's queue was full
	failShutdown = "shutdown"   // still queued or retrying when the drain ended
)

type notifierMetrics struct {
	events     *prometheus.CounterVec // resourceType, eventType
	sent       *prometheus.CounterVec // resourceType, eventType, sink
	failed     *prometheus.CounterVec // sink, reason
	suppressed *prometheus.CounterVec // resourceType, reason
	// checkpointObjects is the objects in the last saved checkpoint, -1
	// once it overflowed.
	checkpointObjects prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*notifierMetrics, error) {
	m := &notifierMetrics{}
	var err error
	if m.events, err = metrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricEvents,
		Help: "Changes seen by the notifier's informers (the initial list excluded), before suppression and filtering.",
	}, []string{"resourceType", "eventType"})); err != nil {
		return nil, err
	}
	if m.sent, err = metrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSent,
		Help: "Notifications a sink delivered.",
	}, []string{"resourceType", "eventType", "sink"})); err != nil {
		return nil, err
	}
	if m.failed, err = metrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricFailed,
		Help: "Notifications a sink gave up on, by reason: attempts, rejected, queue_full, shutdown.",
	}, []string{"sink", "reason"})); err != nil {
		return nil, err
	}
	if m.suppressed, err = metrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSuppressed,
		Help: "Changes not notified, by reason: initial (part of the initial list), unchanged, noop, status, metadata.",
	}, []string{"resourceType", "reason"})); err != nil {
		return nil, err
	}
	if m.checkpointObjects, err = metrics.RegisterOrGet(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricCheckpointObjects,
		Help: "Objects in the notifier's last saved checkpoint; -1 once it overflowed its bound.",
	})); err != nil {
		return nil, err
	}
	return m, nil
}
