package metricstest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/internal/metricstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFind_PicksTheSeriesWithAllGivenLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "things_total"}, []string{"kind", "result"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency_seconds"})
	reg.MustRegister(c, h)
	c.WithLabelValues("a", "ok").Add(2)
	c.WithLabelValues("a", "error").Add(5)
	h.Observe(1.5)
	h.Observe(0.5)

	if v := metricstest.Value(t, reg, "things_total", "kind", "a", "result", "error"); v != 5 {
		t.Errorf("things_total{kind=a,result=error} = %v, want 5", v)
	}
	if v := metricstest.Value(t, reg, "latency_seconds"); v != 2 {
		t.Errorf("histogram sample sum = %v, want 2", v)
	}
	if _, ok := metricstest.Find(t, reg, "things_total", "kind", "b"); ok {
		t.Error("Find reported a series for kind=b, which was never counted")
	}
	if _, ok := metricstest.Find(t, reg, "missing_total"); ok {
		t.Error("Find reported a series for a family that does not exist")
	}
}
