package conditions_test

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/conditions"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

func TestSetCondition_StampsTheGenerationAndChangesNothingTheSecondTime(t *testing.T) {
	foo := &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", Message: "0 of 1"}
	if !conditions.Set(&foo.Status.Conditions, foo, ready) {
		t.Fatal("first SetCondition reported no change")
	}
	c := meta.FindStatusCondition(foo.Status.Conditions, "Ready")
	if c == nil || c.ObservedGeneration != 4 || c.Reason != "Progressing" || c.LastTransitionTime.IsZero() {
		t.Fatalf("condition %+v, want Ready at generation 4 with a transition time", c)
	}
	first := c.LastTransitionTime
	if conditions.Set(&foo.Status.Conditions, foo, ready) {
		t.Error("the same condition again reported a change")
	}
	foo.Generation = 5
	if !conditions.Set(&foo.Status.Conditions, foo, ready) {
		t.Error("a new generation reported no change")
	}
	if c := meta.FindStatusCondition(foo.Status.Conditions, "Ready"); c.ObservedGeneration != 5 || !c.LastTransitionTime.Equal(&first) {
		t.Errorf("condition %+v, want generation 5 and the transition time kept (status unchanged)", c)
	}
	if len(foo.Status.Conditions) != 1 {
		t.Errorf("%d conditions, want the one Ready", len(foo.Status.Conditions))
	}
}

func TestFailed_SetsReadyFalseWithTheReasonAndTheErrorOnce(t *testing.T) {
	foo := &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	conditions.Set(&foo.Status.Conditions, foo, metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: "Available"})
	err := errors.New(`Deployment.apps "Bad_Name!" is invalid`)
	if !conditions.Failed(&foo.Status.Conditions, foo, "DeploymentInvalid", err) {
		t.Fatal("Failed reported no change from Ready=True")
	}
	c := meta.FindStatusCondition(foo.Status.Conditions, "Ready")
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "DeploymentInvalid" || c.Message != err.Error() || c.ObservedGeneration != 2 {
		t.Fatalf("condition %+v, want Ready=False DeploymentInvalid with the error's text at generation 2", c)
	}
	if conditions.Failed(&foo.Status.Conditions, foo, "DeploymentInvalid", err) {
		t.Error("the same failure again reported a change")
	}
}
