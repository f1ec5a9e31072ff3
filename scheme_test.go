package kloop_test

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

func TestNewScheme_HoldsTheBuiltInTypesAndTheAddedOnes(t *testing.T) {
	s := kloop.NewScheme(v1alpha1.AddToScheme)
	for _, obj := range []runtime.Object{&appsv1.Deployment{}, &v1alpha1.Foo{}, &v1alpha1.FooList{}} {
		if kinds, _, err := s.ObjectKinds(obj); err != nil || len(kinds) == 0 {
			t.Errorf("%T not in the scheme: %v", obj, err)
		}
	}
	if s == kloop.NewScheme() {
		t.Error("NewScheme returned the same scheme twice, want a new one each time")
	}
}

func TestNewScheme_PanicsWithTheErrorOfAFailingAdd(t *testing.T) {
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "no such API") {
			t.Errorf("recovered %v, want a panic naming the add's error", v)
		}
	}()
	kloop.NewScheme(func(*runtime.Scheme) error { return errors.New("no such API") })
}
