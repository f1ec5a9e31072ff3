package kmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Observations from every core at once into one child: a plain
// prometheus.Histogram against a Histogram of shards.
func BenchmarkHistogram_ObserveParallel(b *testing.B) {
	opts := nativeOpts()
	for _, c := range []struct {
		name string
		obs  prometheus.Observer
	}{
		{"prometheus", prometheus.NewHistogram(opts)},
		{"sharded", NewHistogramVec(opts, nil).WithLabelValues()},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				v := 1e-6
				for pb.Next() {
					c.obs.Observe(v)
					if v *= 1.3; v > 1 {
						v = 1e-6
					}
				}
			})
		})
	}
}
