package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WidgetSpec is what a Widget asks for.
type WidgetSpec struct {
	// Size is written into the Widget's ConfigMap.
	Size int32 `json:"size"`
}

// WidgetStatus is what the operator last did.
type WidgetStatus struct {
	// ConfigMap is the name of the ConfigMap the operator keeps for the
	// Widget.
	ConfigMap string `json:"configMap,omitempty"`
	// ObservedGeneration is the generation the ConfigMap reflects.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status

// Widget is the operator's kind: each Widget owns a ConfigMap that holds
// its size.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Widget{}, &WidgetList{})
}
