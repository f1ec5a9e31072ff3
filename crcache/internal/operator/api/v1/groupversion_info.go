// Package v1 holds the API of the test operator: the Widget kind of group
// widgets.example.kloop.dev, as `kubebuilder create api` lays an API out.
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the operator's objects.
	GroupVersion = schema.GroupVersion{Group: "widgets.example.kloop.dev", Version: "v1"}

	// SchemeBuilder registers the operator's types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the operator's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
