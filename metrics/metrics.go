// Package metrics holds the Prometheus registry that every kloop component
// registers its collectors with, and that the manager serves on /metrics.
//
// Components take a prometheus.Registerer in their config; when it is nil they
// use Registry. Tests that want isolation pass prometheus.NewRegistry().
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Registry is kloop's default registry. It starts with the Go runtime and
// process collectors, like the default Prometheus registry, but is separate
// from it so kloop never collides with collectors a program registers itself.
var Registry = func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return r
}()

// RegisterOrGet registers c with r and returns c, or, when an equal collector
// is already registered (the same metric names and labels), returns that one,
// so that two components sharing a metric family share one collector.
func RegisterOrGet[C prometheus.Collector](r prometheus.Registerer, c C) (C, error) {
	if r == nil {
		r = Registry
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
