package foo

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeanDeployment is the transform of the controller's Deployment informer
// (Setup sets it): it keeps in d what Reconcile reads, and drops the rest,
// in place, before the cache keeps d. Kept: the metadata that names and
// owns it (name, namespace, UID, resourceVersion, generation, owner
// references, labels, creation and deletion timestamps), spec.replicas,
// the selector and the pod template's labels (one shared map when they are
// equal, as they are for the Deployments this controller makes), each
// container's name and image, and the status's replica counts and observed
// generation. Dropped: annotations, finalizers, the rollout strategy, the
// rest of the pod spec and the status conditions.
func LeanDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	d.Annotations, d.Finalizers, d.ManagedFields = nil, nil, nil
	d.Spec.Strategy = appsv1.DeploymentStrategy{}
	d.Spec.RevisionHistoryLimit, d.Spec.ProgressDeadlineSeconds = nil, nil
	tpl := &d.Spec.Template
	tpl.ObjectMeta = metav1.ObjectMeta{Labels: tpl.Labels}
	if s := d.Spec.Selector; s != nil && len(s.MatchExpressions) == 0 && maps.Equal(s.MatchLabels, tpl.Labels) {
		s.MatchLabels = tpl.Labels
	}
	for i, c := range tpl.Spec.Containers {
		tpl.Spec.Containers[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	tpl.Spec = corev1.PodSpec{Containers: tpl.Spec.Containers}
	d.Status.Conditions, d.Status.CollisionCount = nil, nil
	return d
}
