// Package v2 is the batch.tutorial.kubebuilder.io/v2 API: the CronJob of
// the kubebuilder book's multi-version chapter, whose schedule is a struct
// of cron fields. It is served but not stored: the API server stores v1
// and converts through the App's conversion webhook (see conversion.go).
//
// DeepCopy methods (zz_generated.deepcopy.go) and the CRD manifest
// (samples/cronjob/crd, both versions in one) are generated from the
// markers in types.go by controller-gen; run `make generate` after
// changing them.
//
// +kubebuilder:object:generate=true
// +groupName=batch.tutorial.kubebuilder.io
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../../applyconfiguration
package v2
