package kmetrics

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func nativeOpts() prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Name:                            "test_duration_seconds",
		Help:                            "Test.",
		Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

func write(t *testing.T, m prometheus.Metric) *dto.Histogram {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.Histogram
}

// decode returns h's native buckets, positive ones by index at schema (no
// finer than h's own), as counts.
func decode(h *dto.Histogram, schema int32) map[int32]int64 {
	counts := map[int32]int64{}
	addBuckets(counts, h.GetPositiveSpan(), h.GetPositiveDelta(), h.GetSchema()-schema)
	for i, c := range counts {
		if c == 0 {
			delete(counts, i) // an encoding may carry empty buckets between others
		}
	}
	return counts
}

// sameHistogram fails t unless got and want hold the same observations:
// count, sum, classic buckets, zero bucket and native buckets (compared at
// the coarser of their schemas).
func sameHistogram(t *testing.T, got, want *dto.Histogram) {
	t.Helper()
	if got.GetSampleCount() != want.GetSampleCount() || math.Abs(got.GetSampleSum()-want.GetSampleSum()) > 1e-9*math.Abs(want.GetSampleSum()) {
		t.Errorf("count %d, sum %g; want %d, %g", got.GetSampleCount(), got.GetSampleSum(), want.GetSampleCount(), want.GetSampleSum())
	}
	if len(got.GetBucket()) != len(want.GetBucket()) {
		t.Fatalf("%d classic buckets, want %d", len(got.GetBucket()), len(want.GetBucket()))
	}
	for i, b := range want.GetBucket() {
		if g := got.GetBucket()[i]; g.GetUpperBound() != b.GetUpperBound() || g.GetCumulativeCount() != b.GetCumulativeCount() {
			t.Errorf("classic bucket %d: le %g count %d; want le %g count %d", i, g.GetUpperBound(), g.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	if got.GetZeroCount() != want.GetZeroCount() || got.GetZeroThreshold() != want.GetZeroThreshold() {
		t.Errorf("zero bucket %d (threshold %g), want %d (%g)", got.GetZeroCount(), got.GetZeroThreshold(), want.GetZeroCount(), want.GetZeroThreshold())
	}
	schema := min(got.GetSchema(), want.GetSchema())
	g, w := decode(got, schema), decode(want, schema)
	var total int64
	for i, c := range w {
		if g[i] != c {
			t.Errorf("native bucket %d at schema %d: %d, want %d", i, schema, g[i], c)
		}
		total += c
	}
	if len(g) != len(w) {
		t.Errorf("%d native buckets at schema %d, want %d", len(g), schema, len(w))
	}
	if uint64(total)+want.GetZeroCount() != want.GetSampleCount() {
		t.Errorf("the native buckets hold %d observations and the zero bucket %d, of %d", total, want.GetZeroCount(), want.GetSampleCount())
	}
}

// A Histogram's shards, written, add up to one prometheus.Histogram that
// took the same observations: whether each shard saw values of the whole
// range, or one saw a range wide enough to coarsen its schema and the other
// a narrow one at the finest.
func TestHistogram_ShardsAddUpToOneHistogramOfTheSameObservations(t *testing.T) {
	values := []float64{0, 0, 3e-9}
	for v := 1e-7; v < 10; v *= 1.07 {
		values = append(values, v, v)
	}
	for name, shardOf := range map[string]func(i int, v float64) int{
		"in turn":  func(i int, _ float64) int { return i % 3 },
		"by range": func(_ int, v float64) int { return map[bool]int{true: 0, false: 1}[v < 1e-3 || v > 1] },
	} {
		t.Run(name, func(t *testing.T) {
			opts := nativeOpts()
			desc := prometheus.NewDesc(opts.Name, opts.Help, []string{"controller"}, nil)
			h := newHistogram(opts, desc, []string{"c"})
			h.shards = append(h.shards, prometheus.NewHistogram(opts), prometheus.NewHistogram(opts))
			one := prometheus.NewHistogram(opts)
			for i, v := range values {
				h.shards[shardOf(i, v)].Observe(v)
				one.Observe(v)
			}
			schemas := map[int32]bool{}
			for _, s := range h.shards {
				schemas[write(t, s).GetSchema()] = true
			}
			if name == "by range" && len(schemas) < 2 {
				t.Fatalf("the shards' schemas are %v; the test wants two", schemas)
			}
			got := write(t, h)
			sameHistogram(t, got, write(t, one))
			if n := len(decode(got, got.GetSchema())); n > int(opts.NativeHistogramMaxBucketNumber) {
				t.Errorf("%d native buckets, more than NativeHistogramMaxBucketNumber", n)
			}
			var d dto.Metric
			if err := h.Write(&d); err != nil || len(d.Label) != 1 || d.Label[0].GetName() != "controller" || d.Label[0].GetValue() != "c" {
				t.Errorf("labels %v (%v), want controller=c", d.Label, err)
			}
		})
	}
}

// A child without observations, however many shards it has, writes what
// an empty native prometheus.Histogram does: its schema and zero
// threshold, which tell a native histogram from a classic one, and no
// buckets.
func TestHistogram_WithoutObservationsWritesAnEmptyNativeHistogram(t *testing.T) {
	opts := nativeOpts()
	h := newHistogram(opts, prometheus.NewDesc(opts.Name, opts.Help, nil, nil), nil)
	h.shards = append(h.shards, prometheus.NewHistogram(opts))
	got, want := write(t, h), write(t, prometheus.NewHistogram(opts))
	if got.GetSampleCount() != 0 || got.Schema == nil || got.GetSchema() != want.GetSchema() || got.GetZeroThreshold() != want.GetZeroThreshold() ||
		len(got.GetPositiveSpan()) != len(want.GetPositiveSpan()) || len(got.GetNegativeSpan()) != 0 {
		t.Errorf("empty: %v; want like %v", got, want)
	}
}

// Observations from many goroutines at once are all counted, over shards
// made as cores come to the histogram.
func TestHistogram_CountsEveryObservationFromManyGoroutines(t *testing.T) {
	opts := nativeOpts()
	v := NewHistogramVec(opts, []string{"controller"})
	obs := v.WithLabelValues("c")
	one := prometheus.NewHistogram(opts)
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				obs.Observe(float64(g*each+i) * 1e-6)
			}
		})
	}
	for i := range goroutines * each {
		one.Observe(float64(i) * 1e-6)
	}
	wg.Wait()
	h := obs.(*Histogram)
	if n := len(h.shards); n < 1 || n > maxShards {
		t.Errorf("%d shards, want 1 to %d", n, maxShards)
	}
	sameHistogram(t, write(t, h), write(t, one))
}

// The family registers once; a second vec of it observes through the
// first, and a plain prometheus.HistogramVec of the family registered
// before (controller-runtime's, on a registry both use) takes the
// observations instead.
func TestRegisterHistogramVec_SharesTheFamilyRegisteredFirst(t *testing.T) {
	opts := nativeOpts()
	reg := prometheus.NewRegistry()
	first, err := RegisterHistogramVec(reg, NewHistogramVec(opts, []string{"controller"}))
	if err != nil {
		t.Fatal(err)
	}
	second, err := RegisterHistogramVec(reg, NewHistogramVec(opts, []string{"controller"}))
	if err != nil {
		t.Fatal(err)
	}
	second.WithLabelValues("c").Observe(0.5)
	if got := write(t, first.WithLabelValues("c").(prometheus.Metric)).GetSampleCount(); got != 1 {
		t.Errorf("the first vec's child counts %d, want the second's observation", got)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetType() != dto.MetricType_HISTOGRAM || len(mfs[0].Metric) != 1 ||
		mfs[0].Metric[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("gathered %v (%v); want one histogram with one observation", mfs, err)
	}

	peer := prometheus.NewRegistry()
	plain := prometheus.NewHistogramVec(opts, []string{"controller"})
	peer.MustRegister(plain)
	got, err := RegisterHistogramVec(peer, NewHistogramVec(opts, []string{"controller"}))
	if err != nil {
		t.Fatal(err)
	}
	got.WithLabelValues("c").Observe(0.5)
	if n := write(t, plain.WithLabelValues("c").(prometheus.Metric)).GetSampleCount(); n != 1 {
		t.Errorf("the plain family counts %d, want the observation", n)
	}

	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: opts.Name, Help: opts.Help}, []string{"controller"}))
	if _, err := RegisterHistogramVec(clash, NewHistogramVec(opts, []string{"controller"})); err == nil {
		t.Error("registering over a gauge family of the name: no error")
	}
}
