package kloop_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

func TestLeanDeployment_KeepsWhatTheControllerReadsAndDropsTheRest(t *testing.T) {
	f := &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: types.UID("uid-1")},
		Spec:       v1alpha1.FooSpec{DeploymentName: "web-deploy", Replicas: ptr.To[int32](3)},
	}
	d := foo.NewDeployment(f)
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

	lean := kloop.LeanDeployment(d.DeepCopy())
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

func TestWithTransform_SetsTheInformersTransformAndRefusesOneOfAnotherType(t *testing.T) {
	app := newApp(t, kloop.Options{})
	deps := kloop.Objects[*appsv1.Deployment](app, kloop.WithResource(deployments), kloop.WithTransform(kloop.LeanDeployment))
	if err := deps.Err(); err != nil {
		t.Fatalf("Objects with WithTransform(LeanDeployment): %v", err)
	}
	// The informer has its transform now: another one is refused.
	if err := deps.Informer().SetTransform(kloop.LeanDeployment); err == nil {
		t.Error("SetTransform after WithTransform succeeded, want the informer to have its transform already")
	}
	other := newApp(t, kloop.Options{})
	wrong := kloop.Objects[*appsv1.Deployment](other, kloop.WithResource(deployments),
		kloop.WithTransform(func(p *corev1.Pod) *corev1.Pod { return p }))
	if err := wrong.Err(); err == nil || !strings.Contains(err.Error(), "WithTransform") {
		t.Errorf("Objects[*Deployment] with a transform of Pods = %v, want an error naming WithTransform", err)
	}
}
