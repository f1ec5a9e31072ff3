// Package metricstest reads single series out of a Prometheus registry, for
// tests that assert on what a component counted.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Find returns the value of the first series of family on g whose labels
// include every given name/value pair (labels alternate name, value), and
// whether such a series exists. A counter or gauge gives its value, a
// histogram or summary its sample sum. A gather error fails the test.
func Find(t testing.TB, g prometheus.Gatherer, family string, labels ...string) (float64, bool) {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("metricstest: labels must be name/value pairs, got %q", labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("metricstest: gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return value(m), true
			}
		}
	}
	return 0, false
}

// Value is Find for a series that must exist: it fails the test when none
// matches.
func Value(t testing.TB, g prometheus.Gatherer, family string, labels ...string) float64 {
	t.Helper()
	v, ok := Find(t, g, family, labels...)
	if !ok {
		t.Fatalf("metricstest: no series %s%q", family, labels)
	}
	return v
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == pairs[i] && lp.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return m.Histogram.GetSampleSum()
	case m.Summary != nil:
		return m.Summary.GetSampleSum()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
