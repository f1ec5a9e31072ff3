// Package manifest turns manifests into objects and objects into what a
// controller needs around them: Decode reads YAML or JSON strictly, and
// InstallCRD creates or updates a CRD and waits until it is served.
// (Whether applying an object would change a live one is Handle.Repair's
// question, answered inside kloop.)
package manifest

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
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

// decodeCRD decodes a CustomResourceDefinition manifest, strictly.
func decodeCRD(manifest []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
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
	want, err := decodeCRD(manifest)
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
	if err := waitEstablished(ctx, crds, want.Name); err != nil {
		return fmt.Errorf("waiting for CRD %s to be Established: %w", want.Name, err)
	}
	return nil
}

// waitEstablished watches the CRD called name until it has the condition
// Established or ctx ends. A watch without a resourceVersion starts with
// the CRD as it is now, then reports each change the API server makes to
// its status, so the wait ends on the update that sets Established; a
// watch the server closes is opened again. The error carries the last
// condition that was not True (NamesAccepted says which name is taken).
func waitEstablished(ctx context.Context, crds apiextensionsclient.CustomResourceDefinitionInterface, name string) error {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	var last string // the last condition seen that was not True
	for {
		w, err := crds.Watch(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w%s", context.Cause(ctx), last)
			}
			return err
		}
		done, err := established(ctx, w, &last)
		w.Stop()
		if done || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w%s", context.Cause(ctx), last)
		}
	}
}

// established reads w until the CRD is Established (done), the watch
// ends, or ctx does; it records in last the conditions that are not True.
func established(ctx context.Context, w watch.Interface, last *string) (done bool, _ error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			if ev.Type == watch.Error {
				// An expired watch is opened again; other errors end
				// the wait rather than spin on them.
				if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					return false, err
				}
				return false, nil
			}
			crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			*last = ""
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
				if c.Status != apiextensionsv1.ConditionTrue {
					*last += fmt.Sprintf(" (%s %s: %s)", c.Type, c.Status, c.Message)
				}
			}
		}
	}
}
