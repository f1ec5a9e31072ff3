// Package conditions keeps the status conditions of an object
// (metav1.Condition) the way kubectl and other controllers read them.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set sets cond in *conditions, replacing the one of its type,
// and stamps it with obj's generation (cond.ObservedGeneration), so that a
// reader can tell a condition about the current spec from one about an
// older spec. As with meta.SetStatusCondition, the condition's
// lastTransitionTime is now when its status changes (or cond's own when
// set) and kept otherwise, so setting the same condition again changes
// nothing. It reports whether *conditions changed.
//
//	conditions.Set(&foo.Status.Conditions, foo, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DeploymentAvailable"})
func Set(conditions *[]metav1.Condition, obj metav1.Object, cond metav1.Condition) bool {
	cond.ObservedGeneration = obj.GetGeneration()
	return meta.SetStatusCondition(conditions, cond)
}

// Ready is the type of the standard condition that says whether an object
// is what its spec asks for, the one kubectl wait --for=condition=Ready
// and most dashboards read.
const Ready = "Ready"

// Failed sets the Ready condition False with reason and err's text as its
// message, stamped with obj's generation (see Set): the place where a user
// looks for why the object is not reconciled (kubectl describe, kubectl
// wait), beside the Warning event a failed reconcile records. It reports
// whether *conditions changed, so that a reconcile failing the same way
// again writes nothing.
//
//	conditions.Failed(&foo.Status.Conditions, foo, "DeploymentInvalid", err)
func Failed(conditions *[]metav1.Condition, obj metav1.Object, reason string, err error) bool {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return Set(conditions, obj, metav1.Condition{Type: Ready, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}
