package drift_test

import (
	"testing"

	"github.com/kloop-dev/kloop/internal/drift"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
)

// applied is what a controller applies: replicas, labels, one container.
func applied() *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1"}}},
			},
		},
	}
}

// served is applied as an API server returns it: defaults, metadata and
// status filled in.
func served() *appsv1.Deployment {
	d := applied()
	d.UID, d.ResourceVersion, d.Generation = "u1", "42", 3
	d.CreationTimestamp = metav1.Now()
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	d.Status.Replicas, d.Status.AvailableReplicas = 2, 2
	return d
}

func TestDrifted_ComparesOnlyTheFieldsTheApplySets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(live, want *appsv1.Deployment)
		want   bool
	}{
		{"as served, with defaults and status", func(_, _ *appsv1.Deployment) {}, false},
		{"replicas changed", func(l, _ *appsv1.Deployment) { l.Spec.Replicas = ptr.To[int32](5) }, true},
		{"replicas left to others (nil in the apply)", func(l, w *appsv1.Deployment) { l.Spec.Replicas, w.Spec.Replicas = ptr.To[int32](5), nil }, false},
		{"image changed", func(l, _ *appsv1.Deployment) { l.Spec.Template.Spec.Containers[0].Image = "httpd" }, true},
		{"template label changed", func(l, _ *appsv1.Deployment) { l.Spec.Template.Labels = map[string]string{"app": "other"} }, true},
		{"template label removed", func(l, _ *appsv1.Deployment) { l.Spec.Template.Labels = nil }, true},
		{"a label added by others", func(l, _ *appsv1.Deployment) { l.Spec.Template.Labels = map[string]string{"app": "web", "team": "a"} }, false},
		{"an annotation added by others", func(l, _ *appsv1.Deployment) { l.Spec.Template.Annotations = map[string]string{"note": "x"} }, false},
		{"an env var added to the container", func(l, _ *appsv1.Deployment) {
			l.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "EXTRA", Value: "1"}}
		}, false},
		{"a sidecar before the container (matched by name)", func(l, _ *appsv1.Deployment) {
			l.Spec.Template.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "envoy"}}, l.Spec.Template.Spec.Containers...)
		}, false},
		{"the container renamed", func(l, _ *appsv1.Deployment) { l.Spec.Template.Spec.Containers[0].Name = "nginx" }, true},
		{"the container removed", func(l, _ *appsv1.Deployment) { l.Spec.Template.Spec.Containers = nil }, true},
		{"an env var the apply sets changed", func(l, w *appsv1.Deployment) {
			w.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "a"}}
			l.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "b"}}
		}, true},
		{"an atomic list (args) with an extra item", func(l, w *appsv1.Deployment) {
			w.Spec.Template.Spec.Containers[0].Args = []string{"-v"}
			l.Spec.Template.Spec.Containers[0].Args = []string{"-v", "-x"}
		}, true},
		{"an owner reference the apply sets missing", func(_, w *appsv1.Deployment) {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "o1", Controller: ptr.To(true)}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, want := served(), applied()
			tc.change(live, want)
			if got := drift.Drifted(live, want); got != tc.want {
				t.Errorf("Drifted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDrifted_TakesUnstructuredContentAndCountsWhatCannotBeConvertedAsDrifted(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"replicas": int64(2), "paused": false},
	}}
	if drift.Drifted(live, map[string]any{}) != true {
		// A bare map is not an object the converter takes.
		t.Error("Drifted(live, a map) = false, want true: it cannot be converted")
	}
	want := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(2)}}}
	if drift.Drifted(live, want) {
		t.Error("Drifted = true for a live object holding the applied replicas")
	}
	want.Object["spec"] = map[string]any{"replicas": int64(3)}
	if !drift.Drifted(live, want) {
		t.Error("Drifted = false for other replicas")
	}
	// A float field holding a whole number: int64 in content decoded from
	// JSON, float64 in content converted from a typed object.
	live.Object["spec"] = map[string]any{"ratio": int64(2), "scale": 1.5}
	want.Object["spec"] = map[string]any{"ratio": float64(2), "scale": 1.5}
	if drift.Drifted(live, want) {
		t.Error("Drifted = true for a float 2.0 against the live int64 2")
	}
	want.Object["spec"] = map[string]any{"ratio": 2.5}
	if !drift.Drifted(live, want) {
		t.Error("Drifted = false for a float 2.5 against the live int64 2")
	}
}

// An apply configuration is compared by what it sets, numbers included
// (its JSON has no types: 2 must equal the live int32 2).
func TestDrifted_TakesApplyConfigurations(t *testing.T) {
	labels := map[string]string{"app": "web"}
	cfg := func(replicas int32, image string) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web", "ns").WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("web").WithImage(image)))))
	}
	if drift.Drifted(served(), cfg(2, "nginx:1")) {
		t.Error("a served Deployment drifted from the configuration it was applied from")
	}
	if !drift.Drifted(served(), cfg(3, "nginx:1")) {
		t.Error("replicas 2 against a configuration of 3: not drifted")
	}
	if !drift.Drifted(served(), cfg(2, "nginx:2")) {
		t.Error("another image: not drifted")
	}
}
