package foo_test

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

func TestNewDeployment_IsNamedByTheFooControlledByItAndSelectsItsNginxPods(t *testing.T) {
	f := &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: types.UID("uid-1")},
		Spec:       v1alpha1.FooSpec{DeploymentName: "web-deploy", Replicas: ptr.To[int32](3)},
	}
	d := foo.NewDeployment(f)
	if d.Name != "web-deploy" || d.Namespace != "team" {
		t.Errorf("Deployment %s/%s, want team/web-deploy", d.Namespace, d.Name)
	}
	if !metav1.IsControlledBy(d, f) {
		t.Errorf("owner references %+v do not make the Foo its controller", d.OwnerReferences)
	}
	ref := d.OwnerReferences[0]
	if ref.APIVersion != "samplecontroller.k8s.io/v1alpha1" || ref.Kind != "Foo" || ref.Name != "web" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("owner reference %+v", ref)
	}
	if ptr.Deref(d.Spec.Replicas, 0) != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if want := (labels.Set{"app": "nginx", "controller": "web"}); !sel.Matches(labels.Set(d.Spec.Template.Labels)) ||
		!labels.Equals(d.Spec.Template.Labels, want) {
		t.Errorf("selector %v, pod labels %v, want both %v", sel, d.Spec.Template.Labels, want)
	}
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "nginx" || cs[0].Image != "nginx:latest" {
		t.Errorf("containers %+v", cs)
	}

	// The Deployment shares nothing with the Foo it was made from.
	*f.Spec.Replicas = 5
	if *d.Spec.Replicas != 3 {
		t.Error("the Deployment's replicas alias the Foo's")
	}
	f.Spec.Replicas = nil
	if d := foo.NewDeployment(f); d.Spec.Replicas != nil {
		t.Errorf("replicas %d for a Foo without, want nil (the API server's default)", *d.Spec.Replicas)
	}
}

func TestResourceExistsError_IsSampleControllersMessage(t *testing.T) {
	var err error = &foo.ResourceExistsError{Name: "web"}
	if got, want := err.Error(), `Resource "web" already exists and is not managed by Foo`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	var re *foo.ResourceExistsError
	if !errors.As(fmt.Errorf("sync: %w", err), &re) || re.Name != "web" {
		t.Error("errors.As does not find the ResourceExistsError")
	}
}

func TestStatusSubresource_AsksDiscoveryOnceUntilForget(t *testing.T) {
	gv := v1alpha1.SchemeGroupVersion.String()
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "foos"}}}}
	s := foo.DiscoverStatusSubresource(disc)
	for range 2 {
		if has, err := s.Has(t.Context()); err != nil || has {
			t.Fatalf("Has = %v, %v with only foos served, want false", has, err)
		}
	}
	if n := len(disc.Actions()); n != 1 {
		t.Errorf("%d discovery requests for two calls, want 1", n)
	}

	// The CRD gains the subresource: the remembered answer stays until
	// Forget.
	disc.Resources[0].APIResources = append(disc.Resources[0].APIResources, metav1.APIResource{Name: "foos/status"})
	if has, _ := s.Has(t.Context()); has {
		t.Error("Has changed its answer without Forget")
	}
	s.Forget()
	if has, err := s.Has(t.Context()); err != nil || !has {
		t.Errorf("Has = %v, %v after Forget with foos/status served, want true", has, err)
	}

	disc.Resources = nil
	s.Forget()
	if _, err := s.Has(t.Context()); !apierrors.IsNotFound(err) {
		t.Errorf("Has with the group version not served: err %v, want a NotFound", err)
	}
}
