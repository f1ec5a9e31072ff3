package foo_test

import (
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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
