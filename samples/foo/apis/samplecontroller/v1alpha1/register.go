package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of Foo.
const GroupName = "samplecontroller.k8s.io"

// SchemeGroupVersion is the group and version Foo is served at.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the resource Foos are served as ("foos").
var Resource = SchemeGroupVersion.WithResource("foos")

// Kind is Foo's group, version and kind, as owner references name it.
var Kind = SchemeGroupVersion.WithKind("Foo")

// AddToScheme registers Foo and FooList in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
