// Package v1alpha1 is the samplecontroller.k8s.io/v1alpha1 API: the Foo
// custom resource of Kubernetes' sample-controller, with the same group,
// version, kind, fields and validation, so that sample-controller's CRD and
// example objects work with it unchanged.
//
// DeepCopy methods (zz_generated.deepcopy.go) and the CRD manifest
// (samples/foo/crd) are generated from the markers in types.go by
// controller-gen; run `make generate` after changing them.
//
// +kubebuilder:object:generate=true
// +groupName=samplecontroller.k8s.io
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../../applyconfiguration
package v1alpha1
