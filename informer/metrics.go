package informer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// Lists, watches, relists, events by type and the last resourceVersion
// delivered are counted by the reflector (kloop_reflector_*, labelled with
// the same name as the informer); these are the informer's own.
var (
	objectsOpts = prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "objects",
		Help: "Objects held in the informer's cache.",
	}
	cacheBytesOpts = prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "cache_bytes",
		Help: "Estimated heap bytes of the informer's cached objects (a sample of them, sized with the allocator's rounding, times the objects held).",
	}
	storeRVOpts = prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "store_resource_version",
		Help: "The resourceVersion the informer's cache has caught up with, when numeric.",
	}
	queueDepthOpts = prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "queue_depth",
		Help: "Keys waiting in the delta queue between reflector and cache (a pending snapshot counts as one).",
	}
	changesOpts = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "changes_total",
		Help: "Changes applied to the informer's cache, by type (add, update, delete, delete_final_state_unknown).",
	}
	handlerDepthOpts = prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "handler_queue_depth",
		Help: "Notifications waiting for a handler.",
	}
	filteredOpts = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "filtered_total",
		Help: "Objects received from the API server that the informer's Filter left out (a shard the server did not filter).",
	}
	handlerPanicsOpts = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "informer", Name: "handler_panics_total",
		Help: "Handler callbacks that panicked (the panic was recovered and logged).",
	}
)

type informerMetrics struct {
	objects, storeRV, queueDepth prometheus.Gauge
	cacheBytes                   prometheus.Gauge
	adds, updates, deletes       prometheus.Counter
	deletesUnknown, filtered     prometheus.Counter
	handlerDepth                 *prometheus.GaugeVec
	handlerPanics                *prometheus.CounterVec
}

// newInformerMetrics registers (or reuses) the metric families on reg. A
// registration error leaves working but unexported metrics.
func newInformerMetrics(reg prometheus.Registerer, name string) (*informerMetrics, error) {
	r := kmetrics.NewRegistrar(reg)
	changes := r.CounterVec(changesOpts, "informer", "type")
	m := &informerMetrics{
		objects:        r.GaugeVec(objectsOpts, "informer").WithLabelValues(name),
		cacheBytes:     r.GaugeVec(cacheBytesOpts, "informer").WithLabelValues(name),
		storeRV:        r.GaugeVec(storeRVOpts, "informer").WithLabelValues(name),
		queueDepth:     r.GaugeVec(queueDepthOpts, "informer").WithLabelValues(name),
		adds:           changes.WithLabelValues(name, "add"),
		updates:        changes.WithLabelValues(name, "update"),
		deletes:        changes.WithLabelValues(name, "delete"),
		deletesUnknown: changes.WithLabelValues(name, "delete_final_state_unknown"),
		filtered:       r.CounterVec(filteredOpts, "informer").WithLabelValues(name),
		handlerDepth:   r.GaugeVec(handlerDepthOpts, "informer", "handler"),
		handlerPanics:  r.CounterVec(handlerPanicsOpts, "informer", "handler"),
	}
	return m, r.Err()
}

func (m *informerMetrics) setRV(rv string) { kmetrics.SetResourceVersion(m.storeRV, rv) }
