package workqueue

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// Metric names follow controller-runtime's workqueue_* families, with the
// same labels ("name" and "controller" both carry the queue name), so
// dashboards written for controller-runtime work unchanged.
const (
	metricSubsystem = "workqueue"

	// maxPriorityLabels bounds the priority label values of the depth gauge
	// per queue; further priorities share priorityLabelOverflow.
	maxPriorityLabels     = 25
	priorityLabelOverflow = "exceeded_cardinality_limit"
)

// durationBuckets span 10 ns to 1000 s, like controller-runtime's.
var durationBuckets = prometheus.ExponentialBuckets(10e-9, 10, 12)

// newDurationVec is a duration family; its children take observations from
// the workers' cores without sharing a cache line (kmetrics.HistogramVec).
func newDurationVec(name, help string) *kmetrics.HistogramVec {
	return kmetrics.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem:                       metricSubsystem,
		Name:                            name,
		Help:                            help,
		Buckets:                         durationBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"name", "controller"})
}

// queueMetrics holds one named queue's metric children. All of it except
// inflight, work (observed by Done without the lock), and adds and depth0
// (counted by an add without the lock) is used under the queue's lock.
type queueMetrics struct {
	name     string
	depthVec *prometheus.GaugeVec
	depthBy  map[int64]prometheus.Gauge
	depth0   prometheus.Gauge // depthBy[0], for adds without the lock
	adds     prometheus.Counter
	retries  prometheus.Counter
	latency  prometheus.Observer
	work     prometheus.Observer
	inflight *inflightCollector
}

func newQueueMetrics(name string, reg prometheus.Registerer) *queueMetrics {
	must := func(err error) {
		if err != nil {
			panic(fmt.Sprintf("workqueue %q: registering metrics: %v", name, err))
		}
	}
	depth, err := kmetrics.RegisterOrGet(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: metricSubsystem,
		Name:      "depth",
		Help:      "Number of keys ready to be handed out, by queue and priority.",
	}, []string{"name", "controller", "priority"}))
	must(err)
	adds, err := kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: metricSubsystem,
		Name:      "adds_total",
		Help:      "Number of times a key became ready (new, due after a delay, or requeued at Done).",
	}, []string{"name", "controller"}))
	must(err)
	retries, err := kmetrics.RegisterOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: metricSubsystem,
		Name:      "retries_total",
		Help:      "Number of adds with a positive delay (AddAfter, AddRateLimited).",
	}, []string{"name", "controller"}))
	must(err)
	latency, err := kmetrics.RegisterHistogramVec(reg, newDurationVec("queue_duration_seconds",
		"Seconds a key was ready before Get handed it out."))
	must(err)
	work, err := kmetrics.RegisterHistogramVec(reg, newDurationVec("work_duration_seconds",
		"Seconds from Get handing a key out to its Done."))
	must(err)
	inflight, err := kmetrics.RegisterOrGet(reg, newInflightCollector())
	must(err)

	depth0 := depth.WithLabelValues(name, name, "0")
	return &queueMetrics{
		name:     name,
		depthVec: depth,
		depthBy:  map[int64]prometheus.Gauge{0: depth0},
		depth0:   depth0,
		adds:     adds.WithLabelValues(name, name),
		retries:  retries.WithLabelValues(name, name),
		latency:  latency.WithLabelValues(name, name),
		work:     work.WithLabelValues(name, name),
		inflight: inflight,
	}
}

// depth returns the depth gauge for priority p. A priority keeps the gauge it
// first got, so increments and decrements always pair up.
func (m *queueMetrics) depth(p int64) prometheus.Gauge {
	if g, ok := m.depthBy[p]; ok {
		return g
	}
	if len(m.depthBy) >= maxPriorityLabels {
		return m.depthVec.WithLabelValues(m.name, m.name, priorityLabelOverflow)
	}
	g := m.depthVec.WithLabelValues(m.name, m.name, strconv.FormatInt(p, 10))
	m.depthBy[p] = g
	return g
}

// startMetrics records the hand-out of an entry ready at priority p.
func (q *Queue[K]) startMetrics(e *entry[K], p int64) {
	now := q.now()
	q.m.depth(p).Dec()
	q.m.latency.Observe(float64(now-e.readySince) / 1e9)
	e.startedAt = now
}

// finishMetrics records a Done under the lock.
func (q *Queue[K]) finishMetrics(e *entry[K]) {
	q.m.work.Observe(float64(q.now()-e.startedAt) / 1e9)
}

// eachInFlight calls fn with the hand-out time of every key in flight (or
// reserved for a Get about to return it). Scrapes and Status are rare, so
// they look at every entry rather than every hand-out and Done keeping a
// list. Called with the lock held.
func (q *Queue[K]) eachInFlight(fn func(startedAt int64)) {
	for _, e := range q.entries {
		if e.state()&(stInFlight|stReserved) != 0 {
			fn(e.startedAt)
		}
	}
}

// unfinishedWork reports the summed and the longest age of the keys in
// flight, in seconds.
func (q *Queue[K]) unfinishedWork() (total, longest float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.eachInFlight(func(startedAt int64) {
		age := float64(now-startedAt) / 1e9
		total += age
		longest = max(longest, age)
	})
	return total, longest
}

type inflightSource interface {
	unfinishedWork() (total, longest float64)
}

// inflightCollector computes workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds when scraped, from the queues
// attached to it, so that no goroutine has to refresh them.
type inflightCollector struct {
	unfinished *prometheus.Desc
	longest    *prometheus.Desc

	mu      sync.Mutex
	sources map[string][]inflightSource
}

func newInflightCollector() *inflightCollector {
	return &inflightCollector{
		unfinished: prometheus.NewDesc("workqueue_unfinished_work_seconds",
			"Seconds of work in progress not yet observed by work_duration_seconds; "+
				"a steady rise means stuck workers.", []string{"name", "controller"}, nil),
		longest: prometheus.NewDesc("workqueue_longest_running_processor_seconds",
			"Seconds the longest-running key in flight has been processed.",
			[]string{"name", "controller"}, nil),
		sources: make(map[string][]inflightSource),
	}
}

func (c *inflightCollector) attach(name string, s inflightSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources[name] = append(c.sources[name], s)
}

func (c *inflightCollector) detach(name string, s inflightSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	srcs := c.sources[name]
	for i, x := range srcs {
		if x == s {
			srcs = append(srcs[:i], srcs[i+1:]...)
			break
		}
	}
	if len(srcs) == 0 {
		delete(c.sources, name)
	} else {
		c.sources[name] = srcs
	}
}

func (c *inflightCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.unfinished
	ch <- c.longest
}

func (c *inflightCollector) Collect(ch chan<- prometheus.Metric) {
	// Copy first: queues call detach with their own lock held, and we take
	// their locks below.
	c.mu.Lock()
	byName := make(map[string][]inflightSource, len(c.sources))
	for name, srcs := range c.sources {
		byName[name] = append([]inflightSource(nil), srcs...)
	}
	c.mu.Unlock()
	for name, srcs := range byName {
		var total, longest float64
		for _, s := range srcs {
			t, l := s.unfinishedWork()
			total += t
			longest = max(longest, l)
		}
		ch <- prometheus.MustNewConstMetric(c.unfinished, prometheus.GaugeValue, total, name, name)
		ch <- prometheus.MustNewConstMetric(c.longest, prometheus.GaugeValue, longest, name, name)
	}
}
