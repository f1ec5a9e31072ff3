package kmetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRegistrar_SharesAnEqualFamilyAndKeepsTheFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "things_total", Help: "Things."}
	a := kmetrics.NewRegistrar(reg)
	first := a.CounterVec(opts, "name")
	b := kmetrics.NewRegistrar(reg)
	if second := b.CounterVec(opts, "name"); second != first {
		t.Error("a second registration of an equal family got a collector of its own")
	}
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("errors %v, %v for equal families", a.Err(), b.Err())
	}
	// The same name with other labels cannot be registered: the family
	// still counts, Err says why it is not exported.
	other := b.CounterVec(opts, "other")
	other.WithLabelValues("x").Inc()
	b.GaugeVec(prometheus.GaugeOpts{Name: "things_total", Help: "Again."})
	if b.Err() == nil {
		t.Fatal("no error for a family whose name another family holds")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == "other" {
				t.Error("the family that failed to register is exported")
			}
		}
	}
	if got := kmetrics.Count(other.WithLabelValues("x")); got != 1 {
		t.Errorf("the unregistered family counted %d, want 1", got)
	}
}

func TestSetResourceVersion_SetsOnlyNumbers(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "rv", Help: "rv"})
	kmetrics.SetResourceVersion(g, "42")
	kmetrics.SetResourceVersion(g, "not-a-number")
	kmetrics.SetResourceVersion(g, "")
	if got := kmetrics.Count(g); got != 42 {
		t.Errorf("gauge = %d, want 42 (the last numeric resourceVersion)", got)
	}
}
