package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Foo asks for a Deployment of nginx pods named Spec.DeploymentName with
// Spec.Replicas replicas, and reports how many of them are available.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=foos,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Deployment",type=string,JSONPath=`.spec.deploymentName`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only; please get an approval from Kubernetes API reviewers if you're trying to develop a CRD in the *.k8s.io or *.kubernetes.io groups"
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec FooSpec `json:"spec,omitempty"`
	// +optional
	Status FooStatus `json:"status,omitempty"`
}

// FooSpec is the desired state of a Foo.
type FooSpec struct {
	// DeploymentName names the Deployment the Foo owns, in the Foo's
	// namespace. Without it the controller does nothing for the Foo.
	// +optional
	DeploymentName string `json:"deploymentName,omitempty"`
	// Replicas is the Deployment's replica count. Nil leaves it to the
	// Deployment's default (1).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Replicas *int32 `json:"replicas,omitempty"`
}

// FooStatus is the observed state of a Foo.
type FooStatus struct {
	// AvailableReplicas is the owned Deployment's count of available pods.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// ObservedGeneration is the Foo's metadata.generation this status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions hold Ready: True once the Deployment's pods are all
	// available, False with a reason (DeploymentNameMissing,
	// DeploymentNotOwned, DeploymentProgressing) otherwise.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FooList is a list of Foos.
//
// +kubebuilder:object:root=true
type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Foo `json:"items"`
}
