package watcher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// reflectorMetrics are one reflector's children of the shared metric
// families, resolved once so that the per-event cost is an atomic add.
type reflectorMetrics struct {
	lists, watches, errors prometheus.Counter
	events                 [RelistDone + 1]prometheus.Counter
	lastRV                 prometheus.Gauge
}

var (
	listsDesc = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "reflector", Name: "lists_total",
		Help: "LIST calls (one per page) made by reflectors.",
	}
	watchesDesc = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "reflector", Name: "watches_total",
		Help: "WATCH calls (streaming lists included) made by reflectors.",
	}
	errorsDesc = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "reflector", Name: "errors_total",
		Help: "Errors reported by reflectors (failed calls, watch error events, unexpected objects).",
	}
	eventsDesc = prometheus.CounterOpts{
		Namespace: "kloop", Subsystem: "reflector", Name: "events_total",
		Help: "Events emitted by reflectors, by type. type=\"RelistDone\" counts completed snapshots.",
	}
	lastRVDesc = prometheus.GaugeOpts{
		Namespace: "kloop", Subsystem: "reflector", Name: "last_resource_version",
		Help: "The newest resourceVersion a reflector delivered, when it is numeric.",
	}
)

// newReflectorMetrics registers (or reuses) the metric families on reg. A
// registration error leaves the reflector with working but unexported metrics.
func newReflectorMetrics(reg prometheus.Registerer, name string) (*reflectorMetrics, error) {
	r := kmetrics.NewRegistrar(reg)
	events := r.CounterVec(eventsDesc, "reflector", "type")
	m := &reflectorMetrics{
		lists:   r.CounterVec(listsDesc, "reflector").WithLabelValues(name),
		watches: r.CounterVec(watchesDesc, "reflector").WithLabelValues(name),
		errors:  r.CounterVec(errorsDesc, "reflector").WithLabelValues(name),
		lastRV:  r.GaugeVec(lastRVDesc, "reflector").WithLabelValues(name),
	}
	for t := Added; t <= RelistDone; t++ {
		m.events[t] = events.WithLabelValues(name, t.String())
	}
	return m, r.Err()
}

func (m *reflectorMetrics) setLastRV(rv string) { kmetrics.SetResourceVersion(m.lastRV, rv) }
