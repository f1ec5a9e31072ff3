package kloop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

func TestStoredEqual_TimesCompareAtWhatTheServerStores(t *testing.T) {
	sec := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	status := func(at time.Time) v1alpha1.FooStatus {
		return v1alpha1.FooStatus{AvailableReplicas: 1, Conditions: []metav1.Condition{{Type: "Ready", LastTransitionTime: metav1.NewTime(at)}}}
	}
	for _, c := range []struct {
		name string
		a, b any
		want bool
	}{
		{"a condition's time within the second", status(sec), status(sec.Add(999 * time.Millisecond)), true},
		{"a condition's time in another second", status(sec), status(sec.Add(time.Second)), false},
		{"a time in another zone", metav1.NewTime(sec), metav1.NewTime(sec.In(time.FixedZone("x", 3600))), true},
		{"a micro time within the microsecond", metav1.NewMicroTime(sec.Add(time.Microsecond)), metav1.NewMicroTime(sec.Add(1999 * time.Nanosecond)), true},
		{"a micro time in another microsecond", metav1.NewMicroTime(sec), metav1.NewMicroTime(sec.Add(time.Microsecond)), false},
		{"another replica count", v1alpha1.FooStatus{AvailableReplicas: 1}, v1alpha1.FooStatus{AvailableReplicas: 2}, false},
	} {
		if got := storedEqual.DeepEqual(c.a, c.b); got != c.want {
			t.Errorf("%s: storedEqual = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStatusWrites_ForgettingTheLastEntryLetsTheMapGo(t *testing.T) {
	var w statusWrites
	subscribed := 0
	subscribe := func(func(cache.Key)) error { subscribed++; return nil }
	a, b := cache.Key{Namespace: "ns", Name: "a"}, cache.Key{Namespace: "ns", Name: "b"}
	w.remember(a, "1", v1alpha1.FooStatus{}, subscribe)
	w.remember(b, "2", v1alpha1.FooStatus{}, subscribe)
	w.forget(a)
	if got, ok := w.last(b); !ok || got.rv != "2" || w.byKey == nil {
		t.Fatalf("after forgetting a: b = %+v, %v; want rv 2 kept", got, ok)
	}
	w.forget(b)
	if w.byKey != nil {
		t.Errorf("%d entries in a map kept after the last was forgotten, want the map dropped", len(w.byKey))
	}
	w.remember(a, "3", v1alpha1.FooStatus{}, subscribe)
	if got, ok := w.last(a); !ok || got.rv != "3" || subscribed != 1 {
		t.Errorf("a remembered again = %+v, %v after %d subscriptions; want rv 3, one subscription", got, ok, subscribed)
	}
}
