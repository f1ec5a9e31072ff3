package workqueue

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop/internal/metricstest"
)

// sample finds the value of one series: family name, then label pairs.
func sample(t *testing.T, reg *prometheus.Registry, family string, labels ...string) (float64, bool) {
	t.Helper()
	return metricstest.Find(t, reg, family, labels...)
}

func mustSample(t *testing.T, reg *prometheus.Registry, family string, labels ...string) float64 {
	t.Helper()
	return metricstest.Value(t, reg, family, labels...)
}

func TestQueueMetrics_UseControllerRuntimeNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := New(Options[string]{Name: "foo", Registerer: reg})
	q.Add("a")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			joined := strings.Join(ls, ",")
			if !strings.Contains(joined, "controller=foo") || !strings.Contains(joined, "name=foo") {
				t.Errorf("%s series labelled %s; want name=foo and controller=foo", mf.GetName(), joined)
			}
		}
	}
	sort.Strings(names)
	want := []string{
		"workqueue_adds_total",
		"workqueue_depth",
		"workqueue_longest_running_processor_seconds",
		"workqueue_queue_duration_seconds",
		"workqueue_retries_total",
		"workqueue_unfinished_work_seconds",
		"workqueue_work_duration_seconds",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("families %v; want %v", names, want)
	}
}

func TestQueueMetrics_RecordDepthByPriorityAddsRetriesAndDurations(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(Options[string]{Name: "foo", Registerer: reg, Clock: clk})
	lbl := []string{"name", "foo"}

	q.Add("a")
	q.AddWithPriority("b", 5)
	q.AddAfter("c", time.Second)
	q.AddAfter("c", time.Second) // still one key delayed, but two delayed adds
	if v := mustSample(t, reg, "workqueue_depth", "name", "foo", "priority", "0"); v != 1 {
		t.Errorf("depth{priority=0} = %v, want 1", v)
	}
	if v := mustSample(t, reg, "workqueue_depth", "name", "foo", "priority", "5"); v != 1 {
		t.Errorf("depth{priority=5} = %v, want 1", v)
	}
	if v := mustSample(t, reg, "workqueue_adds_total", lbl...); v != 2 {
		t.Errorf("adds_total = %v, want 2 (c is delayed, not yet added)", v)
	}
	if v := mustSample(t, reg, "workqueue_retries_total", lbl...); v != 2 {
		t.Errorf("retries_total = %v, want 2", v)
	}

	clk.Step(2 * time.Second)
	k := mustGet(t, q) // b, ready for 2s; c becomes ready now
	if k != "b" {
		t.Fatalf("Get = %q, want b", k)
	}
	if v := mustSample(t, reg, "workqueue_adds_total", lbl...); v != 3 {
		t.Errorf("adds_total = %v after c came due, want 3", v)
	}
	if v := mustSample(t, reg, "workqueue_queue_duration_seconds", lbl...); v != 2 {
		t.Errorf("queue_duration_seconds sum = %v, want 2 (b waited 2s)", v)
	}
	if v := mustSample(t, reg, "workqueue_depth", "name", "foo", "priority", "5"); v != 0 {
		t.Errorf("depth{priority=5} = %v after b was handed out, want 0", v)
	}
	if v := mustSample(t, reg, "workqueue_depth", "name", "foo", "priority", "0"); v != 2 {
		t.Errorf("depth{priority=0} = %v, want 2 (a and c)", v)
	}

	clk.Step(3 * time.Second)
	if v := mustSample(t, reg, "workqueue_unfinished_work_seconds", lbl...); v != 3 {
		t.Errorf("unfinished_work_seconds = %v, want 3 (b in flight for 3s)", v)
	}
	k2 := mustGet(t, q) // a, in flight from now
	clk.Step(time.Second)
	if v := mustSample(t, reg, "workqueue_unfinished_work_seconds", lbl...); v != 5 {
		t.Errorf("unfinished_work_seconds = %v, want 5 (4s + 1s)", v)
	}
	if v := mustSample(t, reg, "workqueue_longest_running_processor_seconds", lbl...); v != 4 {
		t.Errorf("longest_running_processor_seconds = %v, want 4", v)
	}
	q.Done(k)
	q.Done(k2)
	if v := mustSample(t, reg, "workqueue_work_duration_seconds", lbl...); v != 5 {
		t.Errorf("work_duration_seconds sum = %v, want 5 (4s + 1s)", v)
	}
	if v := mustSample(t, reg, "workqueue_unfinished_work_seconds", lbl...); v != 0 {
		t.Errorf("unfinished_work_seconds = %v with nothing in flight, want 0", v)
	}

	// Once drained after shutdown the queue stops reporting in-flight work.
	q.ShutDown()
	mustGet(t, q)
	q.Done("c")
	if _, ok := sample(t, reg, "workqueue_unfinished_work_seconds", lbl...); ok {
		t.Error("a drained, shut-down queue still reports unfinished_work_seconds")
	}
}

func TestQueueMetrics_QueuesShareARegistryAndPriorityLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	foo := New(Options[int]{Name: "foo", Registerer: reg})
	bar := New(Options[int]{Name: "bar", Registerer: reg})
	foo.Add(1)
	bar.Add(1)
	bar.Add(2)
	if v := mustSample(t, reg, "workqueue_adds_total", "name", "foo"); v != 1 {
		t.Errorf("adds_total{foo} = %v, want 1", v)
	}
	if v := mustSample(t, reg, "workqueue_adds_total", "name", "bar"); v != 2 {
		t.Errorf("adds_total{bar} = %v, want 2", v)
	}
	for p := range 2 * maxPriorityLabels {
		foo.AddWithPriority(100+p, p)
	}
	v, ok := sample(t, reg, "workqueue_depth", "name", "foo", "priority", priorityLabelOverflow)
	if !ok || v <= 0 {
		t.Errorf("depth{priority=%s} = %v, %v; want the priorities past the limit counted there", priorityLabelOverflow, v, ok)
	}
	// Drain foo: every label, the overflow one included, returns to zero.
	for foo.Status().Ready > 0 {
		k := mustGet(t, foo)
		foo.Done(k)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() != 0 && strings.Contains(m.String(), `value:"foo"`) {
				t.Errorf("depth series %v is %v after foo drained, want 0", m.GetLabel(), m.GetGauge().GetValue())
			}
		}
	}
}

func TestQueueMetrics_UnnamedQueueRecordsNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := New(Options[string]{Registerer: reg})
	q.Add("a")
	q.AddAfter("b", time.Millisecond)
	q.Done(mustGet(t, q))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 0 {
		t.Fatalf("an unnamed queue registered %d metric families; want none", len(mfs))
	}
	if q.m != nil {
		t.Fatal("an unnamed queue has a metrics recorder")
	}
}

func TestQueueMetrics_ConflictingRegistrationPanicsWithTheQueueName(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "workqueue_adds_total", Help: "not ours"}))
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), `"foo"`) {
			t.Fatalf("New recovered %v; want a panic naming queue foo", r)
		}
	}()
	New(Options[string]{Name: "foo", Registerer: reg})
}

func TestQueueMetrics_DoneWithoutTheLockRecordsWorkDurationAndLeavesInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(Options[string]{Name: "bar", Registerer: reg, Clock: clk})
	lbl := []string{"name", "bar"}
	q.Add("a")
	q.Add("b")
	q.mu.Lock()
	q.publish() // the lock-free paths know both keys
	q.mu.Unlock()
	a, b := mustGet(t, q), mustGet(t, q)
	clk.Step(2 * time.Second)
	q.mu.Lock() // held: a Done that took the lock would block here
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Done(a)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		q.mu.Unlock()
		t.Fatal("Done of a key nobody added again waited for the queue's lock")
	}
	q.mu.Unlock()
	if v := mustSample(t, reg, "workqueue_work_duration_seconds", lbl...); v != 2 {
		t.Errorf("work_duration_seconds sum = %v, want 2 (a in flight for 2s)", v)
	}
	clk.Step(time.Second)
	if v := mustSample(t, reg, "workqueue_unfinished_work_seconds", lbl...); v != 3 {
		t.Errorf("unfinished_work_seconds = %v, want 3 (only b, in flight for 3s)", v)
	}
	if s := q.Status(); s.LongestRunning != 3*time.Second || s.InFlight != 1 {
		t.Errorf("Status: LongestRunning %v, InFlight %d; want 3s and 1 (b)", s.LongestRunning, s.InFlight)
	}
	q.Done(b)
	if v := mustSample(t, reg, "workqueue_work_duration_seconds", lbl...); v != 5 {
		t.Errorf("work_duration_seconds sum = %v, want 5 (2s + 3s)", v)
	}
}

// An add without the lock (a key seen before, idle again) counts in depth
// and adds_total as it returns, not when a Get next takes the lock: with
// every worker busy for long, none may take it for as long. A raise and a
// hand-out after move and take off what it counted.
func TestQueueMetrics_AnAddWithoutTheLockCountsAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := New(Options[string]{Name: "foo", Registerer: reg})
	depth := func(p string) float64 {
		t.Helper()
		return mustSample(t, reg, "workqueue_depth", "name", "foo", "priority", p)
	}
	keys := []string{"a", "b", "c"}
	for i := range 40 { // enough keys that the queue publishes its entries for adds without the lock
		keys = append(keys, fmt.Sprint("k", i))
	}
	for _, k := range keys { // each has an entry, idle
		q.Add(k)
		if got, err := q.Get(t.Context()); err != nil || got != k {
			t.Fatalf("Get = %q, %v; want %q", got, err, k)
		}
		q.Done(k)
	}
	q.Add("a")
	q.Add("b")
	if n := q.pendingLen(); n != 2 {
		t.Fatalf("%d entries on the pending stack, want a and b there (added without the lock)", n)
	}
	if v := depth("0"); v != 2 {
		t.Errorf("depth{priority=0} = %v before any drain, want 2", v)
	}
	if v, want := mustSample(t, reg, "workqueue_adds_total", "name", "foo"), float64(len(keys)+2); v != want {
		t.Errorf("adds_total = %v, want %v", v, want)
	}
	q.AddWithPriority("b", 7) // under the lock: b, pending, is raised
	if got, err := q.Get(t.Context()); err != nil || got != "b" {
		t.Fatalf("Get = %q, %v; want b, raised to 7", got, err)
	}
	if v0, v7 := depth("0"), depth("7"); v0 != 1 || v7 != 0 {
		t.Errorf("after b's raise and hand-out: depth{0} = %v, depth{7} = %v; want 1 and 0", v0, v7)
	}
	q.Add("c")
	q.ShutDown()
	for _, want := range []string{"a", "c"} {
		if got, err := q.Get(t.Context()); err != nil || got != want {
			t.Fatalf("Get after ShutDown = %q, %v; want %q, added before it", got, err, want)
		}
	}
	if v := depth("0"); v != 0 {
		t.Errorf("depth{priority=0} = %v once a and c were handed out, want 0", v)
	}
}

// pendingLen counts the pending stack. Only for a test that adds from one
// goroutine.
func (q *Queue[K]) pendingLen() int {
	n := 0
	for e := q.pending.Load(); e != nil; e = e.pendNext {
		n++
	}
	return n
}
