package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of CronJob.
const GroupName = "batch.tutorial.kubebuilder.io"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Resource is the resource CronJobs are served as, in this version.
var Resource = SchemeGroupVersion.WithResource("cronjobs")

// Kind is CronJob's group, version and kind in this version.
var Kind = SchemeGroupVersion.WithKind("CronJob")

// AddToScheme registers CronJob and CronJobList of this version in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &CronJob{}, &CronJobList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
