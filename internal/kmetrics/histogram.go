package kmetrics

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kloop-dev/kloop/metrics"
)

// HistogramVec is a family of histograms, as a prometheus.HistogramVec is,
// whose children (Histogram) take observations from several cores at once
// without passing one cache line between them. A Prometheus histogram's
// Observe adds to counters every observer shares; a native histogram also
// finds its bucket in a sync.Map. Two workers observing one child at the
// same time make each observation up to four times as slow as one alone
// (BENCHMARKS.md, events), and a controller's workers observe three per
// reconcile. The family scrapes as one histogram per child, exactly as a
// prometheus.HistogramVec of the same options would.
type HistogramVec struct {
	opts   prometheus.HistogramOpts
	desc   *prometheus.Desc
	labels int

	mu   sync.Mutex
	kids map[string]*Histogram
}

// NewHistogramVec returns a family of opts with the given variable labels.
func NewHistogramVec(opts prometheus.HistogramOpts, labels []string) *HistogramVec {
	name := prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name)
	return &HistogramVec{
		opts:   opts,
		desc:   prometheus.NewDesc(name, opts.Help, labels, opts.ConstLabels),
		labels: len(labels),
		kids:   make(map[string]*Histogram),
	}
}

// Describe implements prometheus.Collector.
func (v *HistogramVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector: each child, its shards merged.
func (v *HistogramVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	kids := slices.Collect(maps.Values(v.kids))
	v.mu.Unlock()
	for _, h := range kids {
		ch <- h
	}
}

// WithLabelValues returns the child for the label values, making it on
// first use. It panics if their number is not the family's, as
// prometheus.HistogramVec does.
func (v *HistogramVec) WithLabelValues(lvs ...string) prometheus.Observer {
	if len(lvs) != v.labels {
		panic(fmt.Sprintf("%s: %d label values, want %d", v.desc, len(lvs), v.labels))
	}
	key := strings.Join(lvs, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.kids[key]
	if h == nil {
		h = newHistogram(v.opts, v.desc, slices.Clone(lvs))
		v.kids[key] = h
	}
	return h
}

// ObserverVec is what a component observes through: a HistogramVec, or a
// prometheus.HistogramVec of the same family that another program part
// registered first.
type ObserverVec interface {
	WithLabelValues(lvs ...string) prometheus.Observer
}

// RegisterHistogramVec registers v on r (Registry when nil) and returns
// the family to observe through: v, the HistogramVec of the same family
// registered before it, or a prometheus.HistogramVec of that family that
// another library (controller-runtime's metrics, say) registered on the
// same registry, which then takes the observations, as it did before
// kloop's histograms were sharded.
func RegisterHistogramVec(r prometheus.Registerer, v *HistogramVec) (ObserverVec, error) {
	if r == nil {
		r = metrics.Registry
	}
	err := r.Register(v)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return v, err
	}
	switch got := are.ExistingCollector.(type) {
	case *HistogramVec:
		return got, nil
	case *prometheus.HistogramVec:
		return got, nil
	}
	return v, fmt.Errorf("%s is registered already, and not as a histogram family: %w", v.desc, err)
}

// maxShards bounds the shards of one Histogram, whatever GOMAXPROCS is: a
// native histogram takes a few kilobytes, and more shards than this buy
// little, since few goroutines observe one histogram at the same instant.
const maxShards = 8

// Histogram is one child of a HistogramVec: a histogram whose observations
// go to shards, each an ordinary prometheus.Histogram, the one the
// observing core last used; Write adds them up. It implements
// prometheus.Metric and prometheus.Observer. (Counters and gauges were
// sharded so too, as a trial, and bought nothing measurable: an
// uncontended atomic add costs about what the pool does.)
type Histogram struct {
	opts   prometheus.HistogramOpts
	desc   *prometheus.Desc
	labels []*dto.LabelPair

	// pool holds the shards last used, per P: sync.Pool's per-P cache is
	// what sends each core to a shard of its own without a lock. A shard
	// the pool dropped (it empties at garbage collections) stays in
	// shards, which keeps every count.
	pool sync.Pool

	mu     sync.Mutex
	shards []prometheus.Histogram
	next   int
}

func newHistogram(opts prometheus.HistogramOpts, desc *prometheus.Desc, lvs []string) *Histogram {
	return &Histogram{opts: opts, desc: desc, labels: prometheus.MakeLabelPairs(desc, lvs),
		shards: []prometheus.Histogram{prometheus.NewHistogram(opts)}}
}

// Observe implements prometheus.Observer.
func (h *Histogram) Observe(v float64) {
	s, ok := h.pool.Get().(prometheus.Histogram)
	if !ok {
		s = h.shard()
	}
	s.Observe(v)
	h.pool.Put(s)
}

// shard returns a shard for a core whose pool had none: a new one while
// there are fewer than min(GOMAXPROCS, maxShards), else the existing ones
// in turn.
func (h *Histogram) shard() prometheus.Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.shards) < min(runtime.GOMAXPROCS(0), maxShards) && h.next >= len(h.shards) {
		h.shards = append(h.shards, prometheus.NewHistogram(h.opts))
	}
	s := h.shards[h.next%len(h.shards)]
	h.next++
	return s
}

// Desc implements prometheus.Metric.
func (h *Histogram) Desc() *prometheus.Desc { return h.desc }

// Write implements prometheus.Metric: the shards' histograms added up. A
// native histogram's buckets are added at the coarsest schema among the
// shards (a shard coarsens its own when it holds more buckets than
// NativeHistogramMaxBucketNumber), coarsened further while the sum holds
// more than that.
func (h *Histogram) Write(out *dto.Metric) error {
	h.mu.Lock()
	shards := slices.Clone(h.shards)
	h.mu.Unlock()
	parts := make([]*dto.Histogram, len(shards))
	for i, s := range shards {
		var m dto.Metric
		if err := s.Write(&m); err != nil {
			return err
		}
		parts[i] = m.Histogram
	}
	out.Label = h.labels
	out.Histogram = mergeHistograms(parts, h.opts.NativeHistogramMaxBucketNumber)
	return nil
}

// mergeHistograms adds up histograms of the same options.
func mergeHistograms(parts []*dto.Histogram, maxBuckets uint32) *dto.Histogram {
	sum := parts[0]
	if len(parts) == 1 {
		return sum
	}
	for _, p := range parts[1:] {
		sum.SampleCount = new(sum.GetSampleCount() + p.GetSampleCount())
		sum.SampleSum = new(sum.GetSampleSum() + p.GetSampleSum())
		for i, b := range p.GetBucket() {
			if i < len(sum.Bucket) {
				sum.Bucket[i].CumulativeCount = new(sum.Bucket[i].GetCumulativeCount() + b.GetCumulativeCount())
			}
		}
		if p.GetCreatedTimestamp().AsTime().Before(sum.GetCreatedTimestamp().AsTime()) {
			sum.CreatedTimestamp = p.CreatedTimestamp
		}
	}
	if sum.Schema == nil {
		return sum // classic only
	}
	schema := sum.GetSchema()
	for _, p := range parts[1:] {
		schema = min(schema, p.GetSchema())
	}
	pos, neg := map[int32]int64{}, map[int32]int64{}
	var zero uint64
	for _, p := range parts {
		zero += p.GetZeroCount()
		addBuckets(pos, p.GetPositiveSpan(), p.GetPositiveDelta(), p.GetSchema()-schema)
		addBuckets(neg, p.GetNegativeSpan(), p.GetNegativeDelta(), p.GetSchema()-schema)
	}
	for maxBuckets > 0 && uint32(len(pos)+len(neg)) > maxBuckets && schema > -4 {
		pos, neg, schema = coarsen(pos), coarsen(neg), schema-1
	}
	sum.Schema, sum.ZeroCount = new(schema), new(zero)
	sum.PositiveSpan, sum.PositiveDelta = encodeBuckets(pos)
	sum.NegativeSpan, sum.NegativeDelta = encodeBuckets(neg)
	if sum.GetZeroThreshold() == 0 && zero == 0 && len(pos) == 0 && len(neg) == 0 {
		// What a native histogram without observations carries, so that
		// it does not read as a classic one.
		sum.PositiveSpan = []*dto.BucketSpan{{Offset: new(int32(0)), Length: new(uint32(0))}}
	}
	return sum
}

// addBuckets adds the buckets of spans and deltas (a native histogram's
// encoding: each count as the difference from the one before) to counts,
// at a schema coarser by down.
func addBuckets(counts map[int32]int64, spans []*dto.BucketSpan, deltas []int64, down int32) {
	var idx int32
	var count int64
	d := 0
	for _, s := range spans {
		// The first span's offset is its first index; a later one's, how
		// far after the end of the one before it starts.
		idx += s.GetOffset()
		for range s.GetLength() {
			count += deltas[d]
			d++
			counts[coarserIndex(idx, down)] += count
			idx++
		}
	}
}

// coarserIndex is the index, at a schema coarser by down, of the bucket
// that holds bucket idx: a schema lower by one merges each pair of
// buckets, (2i-1, 2i] into i.
func coarserIndex(idx, down int32) int32 {
	if down == 0 {
		return idx
	}
	return ((idx - 1) >> down) + 1
}

func coarsen(counts map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(counts)/2+1)
	for i, c := range counts {
		out[coarserIndex(i, 1)] += c
	}
	return out
}

// encodeBuckets encodes counts as spans of consecutive buckets and deltas.
func encodeBuckets(counts map[int32]int64) ([]*dto.BucketSpan, []int64) {
	if len(counts) == 0 {
		return nil, nil
	}
	idxs := make([]int32, 0, len(counts))
	for i := range counts {
		idxs = append(idxs, i)
	}
	slices.SortFunc(idxs, cmp.Compare[int32])
	var spans []*dto.BucketSpan
	deltas := make([]int64, 0, len(idxs))
	var prev int64
	var end int32 // the index after the last span's last bucket
	for k, i := range idxs {
		if k == 0 || i != end {
			off := i
			if k > 0 {
				off = i - end
			}
			spans = append(spans, &dto.BucketSpan{Offset: new(off), Length: new(uint32(0))})
		}
		s := spans[len(spans)-1]
		*s.Length++
		deltas = append(deltas, counts[i]-prev)
		prev = counts[i]
		end = i + 1
	}
	return spans, deltas
}
