package foo

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// CRDYAML is the Foo CustomResourceDefinition generated from the API types
// by controller-gen (`make generate`), with the status subresource.
//
//go:embed crd/samplecontroller.k8s.io_foos.yaml
var CRDYAML []byte

// ExampleFooYAML is sample-controller's artifacts/examples/example-foo.yaml,
// unchanged: the Foo "example-foo" asking for one replica of the Deployment
// "example-foo".
//
//go:embed artifacts/examples/example-foo.yaml
var ExampleFooYAML []byte

// CRD decodes a CustomResourceDefinition manifest such as CRDYAML.
func CRD(manifest []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(manifest, crd); err != nil {
		return nil, fmt.Errorf("decode CRD: %w", err)
	}
	return crd, nil
}

// DecodeFoo decodes one Foo manifest (YAML or JSON). It fails on anything
// but a samplecontroller.k8s.io/v1alpha1 Foo and on unknown fields.
func DecodeFoo(manifest []byte) (*v1alpha1.Foo, error) {
	codecs := serializer.NewCodecFactory(Scheme(), serializer.EnableStrict)
	obj, gvk, err := codecs.UniversalDeserializer().Decode(manifest, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode Foo: %w", err)
	}
	foo, ok := obj.(*v1alpha1.Foo)
	if !ok {
		return nil, fmt.Errorf("decode Foo: got %v, want %v", gvk, v1alpha1.Kind)
	}
	return foo, nil
}

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

// InstallCRD creates the CustomResourceDefinition in manifest (CRDYAML, or
// one of sample-controller's), or replaces the spec of one of that name,
// and waits until the API server serves it (condition Established) or ctx
// ends.
func InstallCRD(ctx context.Context, cfg *rest.Config, manifest []byte) error {
	want, err := CRD(manifest)
	if err != nil {
		return err
	}
	cs, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	_, err = crds.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var have *apiextensionsv1.CustomResourceDefinition
		if have, err = crds.Get(ctx, want.Name, metav1.GetOptions{}); err == nil {
			have.Spec = want.Spec
			have.Annotations = want.Annotations
			_, err = crds.Update(ctx, have, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", want.Name, err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", want.Name, err)
	}
	return nil
}
