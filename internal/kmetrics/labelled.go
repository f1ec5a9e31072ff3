package kmetrics

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Labelled gathers each of gatherers, keyed by a value of label, and
// returns their metrics merged by family, every series given label with
// its gatherer's key: the per-cluster registries of a fleet, served on one
// /metrics with a cluster label. A gatherer's error is returned with the
// key, next to what the others gathered.
func Labelled(label string, gatherers map[string]prometheus.Gatherer) ([]*dto.MetricFamily, error) {
	keys := make([]string, 0, len(gatherers))
	for k := range gatherers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	byName := map[string]*dto.MetricFamily{}
	var errs []error
	for _, k := range keys {
		mfs, err := gatherers[k].Gather()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", label, k, err))
		}
		for _, mf := range mfs {
			out, ok := byName[mf.GetName()]
			if !ok {
				out = &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Unit: mf.Unit}
				byName[mf.GetName()] = out
			}
			for _, m := range mf.GetMetric() {
				// A new series sharing the gathered (fresh) values.
				labels := append(slices.Clip(m.Label), &dto.LabelPair{Name: &label, Value: &k})
				slices.SortFunc(labels, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
				out.Metric = append(out.Metric, &dto.Metric{Label: labels, Gauge: m.Gauge, Counter: m.Counter, Summary: m.Summary,
					Untyped: m.Untyped, Histogram: m.Histogram, TimestampMs: m.TimestampMs})
			}
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, mf := range byName {
		out = append(out, mf)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, errors.Join(errs...)
}
