// Package kmetrics holds the helpers kloop's components register and read
// their Prometheus collectors with. Users register their own collectors on
// metrics.Registry directly.
package kmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kloop-dev/kloop/metrics"
)

// RegisterOrGet registers c with r and returns c, or, when an equal collector
// is already registered (the same metric names and labels), returns that one,
// so that two components sharing a metric family share one collector.
func RegisterOrGet[C prometheus.Collector](r prometheus.Registerer, c C) (C, error) {
	if r == nil {
		r = metrics.Registry
	}
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if ok := asAlreadyRegistered(err, &are); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

func asAlreadyRegistered(err error, target *prometheus.AlreadyRegisteredError) bool {
	are, ok := err.(prometheus.AlreadyRegisteredError)
	if ok {
		*target = are
	}
	return ok
}

// Read returns the current value of one metric (a counter, gauge or
// histogram child) as Prometheus would scrape it, for components that show
// what they counted without keeping a second count. It returns nil when the
// metric cannot be written.
func Read(m prometheus.Metric) *dto.Metric {
	if m == nil {
		return nil
	}
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return nil
	}
	return &d
}

// Count reads a counter's or a gauge's value as a whole number (0 if m is
// neither); see Read.
func Count(m prometheus.Metric) uint64 {
	d := Read(m)
	switch {
	case d == nil:
		return 0
	case d.Counter != nil:
		return uint64(d.Counter.GetValue())
	case d.Gauge != nil:
		return uint64(max(d.Gauge.GetValue(), 0))
	}
	return 0
}

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
	if rv == "" {
		return // a parse error would allocate, once per event of a snapshot
	}
	if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
		g.Set(float64(v))
	}
}
