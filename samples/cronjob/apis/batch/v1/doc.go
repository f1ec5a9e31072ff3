// Package v1 is the batch.tutorial.kubebuilder.io/v1 API: the CronJob of
// the kubebuilder book, whose schedule is a cron string. It is the storage
// version and the hub of conversion: v2 converts to and from it.
//
// DeepCopy methods (zz_generated.deepcopy.go) and the CRD manifest
// (samples/cronjob/crd) are generated from the markers in types.go by
// controller-gen; run `make generate` after changing them.
//
// +kubebuilder:object:generate=true
// +groupName=batch.tutorial.kubebuilder.io
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../../applyconfiguration
package v1
