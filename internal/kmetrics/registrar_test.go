package kmetrics_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

func TestLabelled_MergesFamiliesAndLabelsEachSeriesWithItsKey(t *testing.T) {
	regs := map[string]prometheus.Gatherer{}
	for i, name := range []string{"east", "west"} {
		reg := prometheus.NewRegistry()
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_total", Help: "Events."}, []string{"kind"})
		reg.MustRegister(c)
		c.WithLabelValues("Pod").Add(float64(i + 1))
		regs[name] = reg
	}
	bad := prometheus.NewRegistry()
	bad.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "up", Help: "Up."}, func() float64 { return 1 }))
	regs["north"] = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, _ := bad.Gather()
		return mfs, errors.New("one collector failed")
	})
	mfs, err := kmetrics.Labelled("cluster", regs)
	if err == nil || !strings.Contains(err.Error(), "cluster north: one collector failed") {
		t.Errorf("error %v, want one naming cluster north", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"events_total{cluster=east,kind=Pod}": 1,
		"events_total{cluster=west,kind=Pod}": 2,
		"up{cluster=north}":                   1,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	// What Labelled returns is valid exposition: a registry's Gatherers
	// accept it next to their own.
	if _, err := (prometheus.Gatherers{prometheus.NewRegistry(), prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return kmetrics.Labelled("cluster", map[string]prometheus.Gatherer{"east": regs["east"], "west": regs["west"]})
	})}).Gather(); err != nil {
		t.Errorf("Gatherers over Labelled: %v", err)
	}
}
