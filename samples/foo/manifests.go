package foo

import (
	_ "embed"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// CRDYAML is the Foo CustomResourceDefinition generated from the API types
// by controller-gen (`make generate`), with the status subresource. Install
// it with kloop.InstallCRD.
//
//go:embed crd/samplecontroller.k8s.io_foos.yaml
var CRDYAML []byte

// ExampleFooYAML is sample-controller's artifacts/examples/example-foo.yaml,
// unchanged: the Foo "example-foo" asking for one replica of the Deployment
// "example-foo". Decode it with kloop.Decode[*v1alpha1.Foo](Scheme(), ...).
//
//go:embed artifacts/examples/example-foo.yaml
var ExampleFooYAML []byte

// Scheme returns a new scheme with the built-in types and Foo.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
