package kloop

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop/internal/await"
)

// Decode decodes one manifest (YAML or JSON) into T, which scheme must
// register. It fails on another kind and on unknown fields, naming them.
func Decode[T runtime.Object](scheme *runtime.Scheme, manifest []byte) (T, error) {
	var zero T
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	obj, gvk, err := codecs.UniversalDeserializer().Decode(manifest, nil, nil)
	if err != nil {
		return zero, fmt.Errorf("decode %T: %w", zero, err)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("decode %T: the manifest is a %v", zero, gvk)
	}
	return t, nil
}

// DecodeCRD decodes a CustomResourceDefinition manifest, strictly.
func DecodeCRD(manifest []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(manifest, crd); err != nil {
		return nil, fmt.Errorf("decode CRD: %w", err)
	}
	return crd, nil
}

// InstallCRD creates the CustomResourceDefinition in manifest, or replaces
// the spec and annotations of the one of that name, and waits until the
// API server serves it (condition Established) or ctx ends. It waits on a
// watch of that CRD, not by asking again on a timer; the error names the
// CRD and says what the wait ended on.
func InstallCRD(ctx context.Context, cfg *rest.Config, manifest []byte) error {
	want, err := DecodeCRD(manifest)
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
	// A watch from the current state: it reports the CRD as it is now and
	// then each change the API server makes to its status, so the wait
	// ends on the update that sets Established.
	_, err = await.ObjectContext(ctx, crds, want.Name, await.CRDEstablished)
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be Established: %w", want.Name, err)
	}
	return nil
}
