package kloop

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme returns a new scheme with client-go's built-in types and those
// each add registers (an API package's AddToScheme), for Options.Scheme:
//
//	opts.Scheme = kloop.NewScheme(v1alpha1.AddToScheme)
//
// An add that fails is a programming error (a type registered twice under
// different kinds): NewScheme panics with it.
func NewScheme(add ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, f := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, add...) {
		if err := f(s); err != nil {
			panic(fmt.Sprintf("kloop.NewScheme: %v", err))
		}
	}
	return s
}
