// Package metrics holds the Prometheus registry that every kloop component
// registers its collectors with, and that the manager serves on /metrics.
//
// Components take a prometheus.Registerer in their config; when it is nil they
// use Registry. Tests that want isolation pass prometheus.NewRegistry().
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Registry is kloop's default registry. It starts with the Go runtime and
// process collectors, like the default Prometheus registry, but is separate
// from it so kloop never collides with collectors a program registers itself.
var Registry = func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return r
}()
