package v2

import (
	"fmt"
	"slices"
	"strings"

	v1 "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	"github.com/kloop-dev/kloop/webhook"
)

// Conversion to and from v1, the hub. The schedule is the one field whose
// form differs: v1's string is v2's five fields joined by spaces, "*" for
// a field left out. What one form cannot say the other keeps in an
// annotation, so that a round trip through either version gives back what
// was written:
//   - V1ScheduleAnnotation, on a v2 CronJob: v1's schedule when the fields
//     cannot say it exactly (a descriptor such as "@hourly", whose
//     meaning the fields then show; "@every 1h"; extra spaces). It is used
//     again as long as the fields are not changed.
//   - UnsetFieldsAnnotation, on a v1 CronJob: the v2 fields that were left
//     out (their "*" in the string goes back to unset).
const (
	V1ScheduleAnnotation  = "batch.tutorial.kubebuilder.io/v1-schedule"
	UnsetFieldsAnnotation = "batch.tutorial.kubebuilder.io/v2-unset-schedule-fields"
)

// fieldNames are the schedule's fields in cron order, as JSON names them.
var fieldNames = [5]string{"minute", "hour", "dayOfMonth", "month", "dayOfWeek"}

// fields returns pointers to s's fields in cron order.
func (s *CronSchedule) fields() [5]**CronField {
	return [5]**CronField{&s.Minute, &s.Hour, &s.DayOfMonth, &s.Month, &s.DayOfWeek}
}

// String is the schedule as v1 writes it: the fields in order, "*" for one
// left out.
func (s CronSchedule) String() string {
	parts := make([]string, 0, 5)
	for _, f := range s.fields() {
		if *f == nil {
			parts = append(parts, "*")
		} else {
			parts = append(parts, string(**f))
		}
	}
	return strings.Join(parts, " ")
}

// equal reports whether s and o have the same fields set to the same
// values.
func (s *CronSchedule) equal(o *CronSchedule) bool {
	of := o.fields()
	for i, f := range s.fields() {
		if (*f == nil) != (*of[i] == nil) || *f != nil && **f != **of[i] {
			return false
		}
	}
	return true
}

// descriptors are the cron descriptors that have a five-field equivalent.
var descriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// ParseSchedule splits a v1 schedule into fields. A descriptor with a
// five-field equivalent gives that; anything else that is not five fields
// gives no fields, and exact reports whether the fields say schedule
// exactly (String gives it back).
func ParseSchedule(schedule string) (s CronSchedule, exact bool) {
	parts := strings.Fields(schedule)
	if d, ok := descriptors[schedule]; ok {
		parts = strings.Fields(d)
	}
	if len(parts) == 5 {
		for i, f := range s.fields() {
			v := CronField(parts[i])
			*f = &v
		}
	}
	return s, s.String() == schedule && len(parts) == 5
}

// ConvertToHub writes cj as a v1 CronJob into dst.
func (cj *CronJob) ConvertToHub(dst *v1.CronJob) error {
	dst.ObjectMeta = *cj.ObjectMeta.DeepCopy()
	dst.APIVersion, dst.Kind = v1.SchemeGroupVersion.String(), "CronJob"
	sched, fromFields := cj.Spec.Schedule.String(), true
	if orig, ok := dst.Annotations[V1ScheduleAnnotation]; ok {
		if parsed, _ := ParseSchedule(orig); parsed.equal(&cj.Spec.Schedule) {
			sched, fromFields = orig, false // fields unchanged since v1's schedule was read
		}
	}
	deleteAnnotation(&dst.Annotations, V1ScheduleAnnotation)
	var unset []string
	for i, f := range cj.Spec.Schedule.fields() {
		if *f == nil {
			unset = append(unset, fieldNames[i])
		}
	}
	deleteAnnotation(&dst.Annotations, UnsetFieldsAnnotation)
	if len(unset) > 0 && fromFields {
		setAnnotation(&dst.Annotations, UnsetFieldsAnnotation, strings.Join(unset, ","))
	}
	s := cj.Spec.DeepCopy()
	dst.Spec = v1.CronJobSpec{
		Schedule:                   sched,
		StartingDeadlineSeconds:    s.StartingDeadlineSeconds,
		ConcurrencyPolicy:          v1.ConcurrencyPolicy(s.ConcurrencyPolicy),
		Suspend:                    s.Suspend,
		JobTemplate:                s.JobTemplate,
		SuccessfulJobsHistoryLimit: s.SuccessfulJobsHistoryLimit,
		FailedJobsHistoryLimit:     s.FailedJobsHistoryLimit,
	}
	st := cj.Status.DeepCopy()
	dst.Status = v1.CronJobStatus{Active: st.Active, LastScheduleTime: st.LastScheduleTime}
	return nil
}

// ConvertFromHub writes src, a v1 CronJob, into cj.
func (cj *CronJob) ConvertFromHub(src *v1.CronJob) error {
	cj.ObjectMeta = *src.ObjectMeta.DeepCopy()
	cj.APIVersion, cj.Kind = SchemeGroupVersion.String(), "CronJob"
	sched, exact := ParseSchedule(src.Spec.Schedule)
	if unset, ok := cj.Annotations[UnsetFieldsAnnotation]; ok {
		names := strings.Split(unset, ",")
		for i, f := range sched.fields() {
			if *f != nil && **f == "*" && slices.Contains(names, fieldNames[i]) {
				*f = nil
			}
		}
		deleteAnnotation(&cj.Annotations, UnsetFieldsAnnotation)
	}
	if !exact {
		setAnnotation(&cj.Annotations, V1ScheduleAnnotation, src.Spec.Schedule)
	}
	s := src.Spec.DeepCopy()
	cj.Spec = CronJobSpec{
		Schedule:                   sched,
		StartingDeadlineSeconds:    s.StartingDeadlineSeconds,
		ConcurrencyPolicy:          ConcurrencyPolicy(s.ConcurrencyPolicy),
		Suspend:                    s.Suspend,
		JobTemplate:                s.JobTemplate,
		SuccessfulJobsHistoryLimit: s.SuccessfulJobsHistoryLimit,
		FailedJobsHistoryLimit:     s.FailedJobsHistoryLimit,
	}
	st := src.Status.DeepCopy()
	cj.Status = CronJobStatus{Active: st.Active, LastScheduleTime: st.LastScheduleTime}
	return nil
}

func setAnnotation(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// deleteAnnotation deletes k, leaving nil rather than an empty map, as a
// CronJob without annotations decodes.
func deleteAnnotation(m *map[string]string, k string) {
	delete(*m, k)
	if len(*m) == 0 {
		*m = nil
	}
}

// errNotHub is the error of a conversion given something other than a v1
// CronJob.
func errNotHub(got any) error {
	return fmt.Errorf("conversion of a v2 CronJob needs a *v1.CronJob as the hub, got %T", got)
}

// ConvertTo converts cj to dst, which must be a *v1.CronJob (the hub).
func (cj *CronJob) ConvertTo(dst webhook.Hub) error {
	hub, ok := dst.(*v1.CronJob)
	if !ok {
		return errNotHub(dst)
	}
	return cj.ConvertToHub(hub)
}

// ConvertFrom fills cj from src, which must be a *v1.CronJob (the hub).
func (cj *CronJob) ConvertFrom(src webhook.Hub) error {
	hub, ok := src.(*v1.CronJob)
	if !ok {
		return errNotHub(src)
	}
	return cj.ConvertFromHub(hub)
}
