package client

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// An apply configuration is walked rather than encoded (applyContent); the
// patch must be the one its JSON encoding makes, field for field: quantities,
// int-or-strings, times, inlined type metadata, empty and unset fields.
func TestApplyBody_IsTheConfigurationsJSON(t *testing.T) {
	deleted := metav1.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	cfg := appsv1ac.Deployment("web", "ns").
		WithLabels(map[string]string{"app": "web"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").WithName("o").WithUID("u1").WithController(true)).
		WithDeletionTimestamp(deleted).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(3).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})).
			WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().WithMaxSurge(intstr.FromString("25%")).WithMaxUnavailable(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(map[string]string{"app": "web"}).
				WithSpec(corev1ac.PodSpec().
					WithContainers(corev1ac.Container().WithName("c").WithImage("nginx").WithArgs().
						WithEnv(corev1ac.EnvVar().WithName("E").WithValue("")).
						WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")})).
						WithReadinessProbe(corev1ac.Probe().WithPeriodSeconds(5).WithHTTPGet(corev1ac.HTTPGetAction().WithPort(intstr.FromInt32(80))))))))
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	body, ns, name, err := applyBody(cfg, gvk, "42")
	if err != nil {
		t.Fatalf("applyBody: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the body is not JSON: %v", err)
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	want["metadata"].(map[string]any)["resourceVersion"] = "42"
	if ns != "ns" || name != "web" || !reflect.DeepEqual(got, want) {
		t.Errorf("applyBody = %s (%s/%s)\nwant the configuration's JSON with the resourceVersion: %s", body, ns, name, data)
	}
}
