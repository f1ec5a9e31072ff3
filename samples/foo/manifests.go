package foo

import _ "embed"

// CRDYAML is the Foo CustomResourceDefinition generated from the API types
// by controller-gen (`make generate`), with the status subresource. Install
// it with manifest.InstallCRD.
//
//go:embed crd/samplecontroller.k8s.io_foos.yaml
var CRDYAML []byte

// ExampleFooYAML is sample-controller's artifacts/examples/example-foo.yaml,
// unchanged: the Foo "example-foo" asking for one replica of the Deployment
// "example-foo". Decode it with manifest.Decode[*v1alpha1.Foo](Scheme(), ...).
//
//go:embed artifacts/examples/example-foo.yaml
var ExampleFooYAML []byte
