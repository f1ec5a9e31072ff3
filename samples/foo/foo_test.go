package foo_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

func TestNewDeployment_IsNamedByTheFooControlledByItAndSelectsItsNginxPods(t *testing.T) {
	f := &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: types.UID("uid-1")},
		Spec:       v1alpha1.FooSpec{DeploymentName: "web-deploy", Replicas: ptr.To[int32](3)},
	}
	cfg := foo.NewDeployment(f)
	d := typedDeployment(t, cfg)
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

	// The configuration shares nothing with the Foo it was made from.
	*f.Spec.Replicas = 5
	if *cfg.Spec.Replicas != 3 {
		t.Error("the Deployment's replicas alias the Foo's")
	}
	f.Spec.Replicas = nil
	if d := foo.NewDeployment(f); d.Spec.Replicas != nil {
		t.Errorf("replicas %d for a Foo without, want none (the API server's default)", *d.Spec.Replicas)
	}
	// It sends only the fields foo-controller owns: no zero values of the
	// typed object (status, strategy, creationTimestamp, resources).
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, unowned := range []string{"status", "strategy", "creationTimestamp", "resources"} {
		if strings.Contains(string(data), `"`+unowned+`"`) {
			t.Errorf("the apply configuration sets %q: %s", unowned, data)
		}
	}
}

// typedDeployment is the Deployment an apply of cfg describes.
func typedDeployment(t *testing.T, cfg *appsv1ac.DeploymentApplyConfiguration) *appsv1.Deployment {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return &d
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

func TestLeanDeployment_KeepsWhatTheControllerReadsAndDropsTheRest(t *testing.T) {
	f := &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: types.UID("uid-1")},
		Spec:       v1alpha1.FooSpec{DeploymentName: "web-deploy", Replicas: ptr.To[int32](3)},
	}
	d := typedDeployment(t, foo.NewDeployment(f))
	// What the API server adds: defaults, an annotation, conditions.
	d.UID, d.ResourceVersion, d.Generation = "dep-uid", "42", 2
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Spec.Selector.MatchLabels = map[string]string{"app": "nginx", "controller": "web"} // equal, not the same map
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	d.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}

	lean := foo.LeanDeployment(d.DeepCopy())
	if lean.Name != "web-deploy" || lean.Namespace != "team" || lean.UID != "dep-uid" || lean.ResourceVersion != "42" || lean.Generation != 2 ||
		!metav1.IsControlledBy(lean, f) {
		t.Errorf("lean metadata = %+v, want the name, namespace, UID, resourceVersion, generation and controller kept", lean.ObjectMeta)
	}
	if *lean.Spec.Replicas != 3 || !equality.Semantic.DeepEqual(lean.Spec.Selector, d.Spec.Selector) || !equality.Semantic.DeepEqual(lean.Spec.Template.Labels, d.Spec.Template.Labels) {
		t.Errorf("lean spec = %+v, want replicas, selector and template labels kept", lean.Spec)
	}
	if c := lean.Spec.Template.Spec.Containers; len(c) != 1 || !equality.Semantic.DeepEqual(c[0], corev1.Container{Name: "nginx", Image: foo.NginxImage}) {
		t.Errorf("lean containers = %+v, want only nginx's name and image", c)
	}
	if want := (appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}); !equality.Semantic.DeepEqual(lean.Status, want) {
		t.Errorf("lean status = %+v, want %+v", lean.Status, want)
	}
	if lean.Annotations != nil || lean.Spec.Strategy.Type != "" || lean.Spec.RevisionHistoryLimit != nil || lean.Spec.Template.Spec.DNSPolicy != "" {
		t.Errorf("lean Deployment kept %v, %q, %v, %q; want them dropped", lean.Annotations, lean.Spec.Strategy.Type, lean.Spec.RevisionHistoryLimit, lean.Spec.Template.Spec.DNSPolicy)
	}
	lean.Spec.Template.Labels["probe"] = "x"
	if lean.Spec.Selector.MatchLabels["probe"] != "x" {
		t.Error("the selector and the template labels are equal but not one map")
	}
}

// Scheme registers every kind the sample reads, writes or records events
// about, and nothing it does not use (kloop.NewScheme has the rest).
func TestScheme_RegistersTheKindsTheSampleUsesAndNoOthers(t *testing.T) {
	s := foo.Scheme()
	for _, obj := range []runtime.Object{&v1alpha1.Foo{}, &v1alpha1.FooList{}, &appsv1.Deployment{}, &appsv1.DeploymentList{}, &corev1.Pod{}, &corev1.Event{}} {
		if kinds, _, err := s.ObjectKinds(obj); err != nil || len(kinds) == 0 {
			t.Errorf("foo.Scheme() does not register %T: %v", obj, err)
		}
	}
	if s.IsGroupRegistered("batch") {
		t.Error("foo.Scheme() registers batch, which the sample does not use")
	}
}
