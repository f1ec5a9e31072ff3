package cronjob_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/cronjob"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
)

func newCronJob(name, schedule string) *batch.CronJob {
	return &batch.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.CronJobSpec{Schedule: schedule}}
}

func TestSetDefaults_FillsInTheBooksDefaultsAndKeepsWhatIsSet(t *testing.T) {
	cj := newCronJob("a", "* * * * *")
	cronjob.SetDefaults(cj)
	s := cj.Spec
	if s.ConcurrencyPolicy != batch.AllowConcurrent || s.Suspend == nil || *s.Suspend ||
		ptr.Deref(s.SuccessfulJobsHistoryLimit, -1) != 3 || ptr.Deref(s.FailedJobsHistoryLimit, -1) != 1 {
		t.Errorf("defaults: %+v", s)
	}
	set := newCronJob("b", "* * * * *")
	set.Spec.ConcurrencyPolicy, set.Spec.Suspend = batch.ForbidConcurrent, ptr.To(true)
	set.Spec.SuccessfulJobsHistoryLimit, set.Spec.FailedJobsHistoryLimit = ptr.To[int32](0), ptr.To[int32](7)
	cronjob.SetDefaults(set)
	s = set.Spec
	if s.ConcurrencyPolicy != batch.ForbidConcurrent || !*s.Suspend || *s.SuccessfulJobsHistoryLimit != 0 || *s.FailedJobsHistoryLimit != 7 {
		t.Errorf("set values changed: %+v", s)
	}
}

func TestValidate_RefusesALongNameAndABadScheduleNamingTheFields(t *testing.T) {
	cases := []struct {
		name, schedule string
		wantFields     []string
	}{
		{"ok", "*/5 * * * *", nil},
		{"descriptor", "@hourly", nil},
		{"bad-schedule", "every minute", []string{"spec.schedule"}},
		{"six-fields", "0 * * * * *", []string{"spec.schedule"}},
		{strings.Repeat("n", 52), "* * * * *", nil},
		{strings.Repeat("n", 53), "* * * * *", []string{"metadata.name"}},
		{strings.Repeat("n", 53), "nope", []string{"metadata.name", "spec.schedule"}},
	}
	for _, c := range cases {
		_, err := cronjob.Validate(newCronJob(c.name, c.schedule))
		if c.wantFields == nil {
			if err != nil {
				t.Errorf("%s %q: %v", c.name, c.schedule, err)
			}
			continue
		}
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s %q: %v, want an Invalid error", c.name, c.schedule, err)
			continue
		}
		causes := err.(apierrors.APIStatus).Status().Details.Causes
		if len(causes) != len(c.wantFields) {
			t.Errorf("%s %q: causes %v, want fields %v", c.name, c.schedule, causes, c.wantFields)
			continue
		}
		for i, f := range c.wantFields {
			if causes[i].Field != f {
				t.Errorf("%s %q: cause %d names %q, want %q", c.name, c.schedule, i, causes[i].Field, f)
			}
		}
		if d := err.(apierrors.APIStatus).Status().Details; d.Kind != "CronJob" || d.Group != batch.GroupName {
			t.Errorf("details name %s/%s", d.Group, d.Kind)
		}
	}
}

func TestValidate_WarnsOfAnUnsetStartingDeadline(t *testing.T) {
	cj := newCronJob("a", "* * * * *")
	if w, _ := cronjob.Validate(cj); len(w) != 1 || w[0] != cronjob.WarningNoStartingDeadline {
		t.Errorf("warnings %q", w)
	}
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](30)
	if w, _ := cronjob.Validate(cj); len(w) != 0 {
		t.Errorf("warnings %q, want none", w)
	}
}

func TestValidateUpdateOf_RefusesMakingTheScheduleInvalidButLetsAnInvalidOneBeSuspended(t *testing.T) {
	good := newCronJob("a", "* * * * *")
	bad := newCronJob("a", "every minute")
	if _, err := cronjob.ValidateUpdateOf(good, bad); !apierrors.IsInvalid(err) {
		t.Errorf("good to bad: %v, want Invalid", err)
	}
	suspended := bad.DeepCopy()
	suspended.Spec.Suspend = ptr.To(true)
	if _, err := cronjob.ValidateUpdateOf(bad, suspended); err != nil {
		t.Errorf("suspending an already invalid CronJob: %v", err)
	}
	if _, err := cronjob.ValidateUpdateOf(bad, good); err != nil {
		t.Errorf("repairing: %v", err)
	}
}
