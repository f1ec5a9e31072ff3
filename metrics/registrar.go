package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Registrar registers a component's metric families on one Registerer,
// each through RegisterOrGet, and keeps the first error, so that the
// component registers all its families and handles one error at the end.
// A family that failed to register still works; it is only not exported.
type Registrar struct {
	reg prometheus.Registerer
	err error
}

// NewRegistrar returns a Registrar for reg (Registry when nil).
func NewRegistrar(reg prometheus.Registerer) *Registrar { return &Registrar{reg: reg} }

// Register registers c (or finds the equal collector already registered)
// and returns the one to use.
func Register[C prometheus.Collector](r *Registrar, c C) C {
	got, err := RegisterOrGet(r.reg, c)
	if err != nil && r.err == nil {
		r.err = err
	}
	return got
}

// CounterVec registers a counter family with the given label names.
func (r *Registrar) CounterVec(opts prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	return Register(r, prometheus.NewCounterVec(opts, labels))
}

// GaugeVec registers a gauge family with the given label names.
func (r *Registrar) GaugeVec(opts prometheus.GaugeOpts, labels ...string) *prometheus.GaugeVec {
	return Register(r, prometheus.NewGaugeVec(opts, labels))
}

// Err is the first registration error, or nil.
func (r *Registrar) Err() error { return r.err }

// SetResourceVersion sets g to rv when rv is a number, as etcd's
// resourceVersions are; it leaves g alone otherwise (resourceVersions are
// opaque, and another store may use other strings).
func SetResourceVersion(g prometheus.Gauge, rv string) {
	if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
		g.Set(float64(v))
	}
}
