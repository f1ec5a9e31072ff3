package v2_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	v2 "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v2"
	"github.com/kloop-dev/kloop/webhook"
)

func field(s string) *v2.CronField { f := v2.CronField(s); return &f }

func hubCronJob(schedule string, annotations map[string]string) *v1.CronJob {
	cj := &v1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch.tutorial.kubebuilder.io/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Annotations: annotations},
		Spec: v1.CronJobSpec{
			Schedule: schedule, StartingDeadlineSeconds: ptr.To[int64](10), ConcurrencyPolicy: v1.ForbidConcurrent,
			Suspend: ptr.To(true), SuccessfulJobsHistoryLimit: ptr.To[int32](2), FailedJobsHistoryLimit: ptr.To[int32](0),
		},
		Status: v1.CronJobStatus{LastScheduleTime: &metav1.Time{}},
	}
	cj.Spec.JobTemplate.Spec.Parallelism = ptr.To[int32](3)
	return cj
}

func TestConvertFromHub_SplitsTheScheduleAndCopiesTheRest(t *testing.T) {
	var got v2.CronJob
	if err := got.ConvertFromHub(hubCronJob("*/5 1 * JAN MON-FRI", nil)); err != nil {
		t.Fatal(err)
	}
	want := v2.CronSchedule{Minute: field("*/5"), Hour: field("1"), DayOfMonth: field("*"), Month: field("JAN"), DayOfWeek: field("MON-FRI")}
	if !equality.Semantic.DeepEqual(got.Spec.Schedule, want) || got.Annotations != nil {
		t.Errorf("schedule %v annotations %v, want %v and none", got.Spec.Schedule, got.Annotations, want)
	}
	if got.APIVersion != "batch.tutorial.kubebuilder.io/v2" || got.Spec.ConcurrencyPolicy != v2.ForbidConcurrent ||
		*got.Spec.StartingDeadlineSeconds != 10 || !*got.Spec.Suspend || *got.Spec.JobTemplate.Spec.Parallelism != 3 ||
		*got.Spec.SuccessfulJobsHistoryLimit != 2 || *got.Spec.FailedJobsHistoryLimit != 0 || got.Status.LastScheduleTime == nil {
		t.Errorf("not copied: %+v", got)
	}
}

func TestConvertToHub_JoinsTheFieldsWithStarsForTheMissingOnes(t *testing.T) {
	src := &v2.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v2.CronJobSpec{Schedule: v2.CronSchedule{Minute: field("0"), DayOfWeek: field("SUN")}}}
	var hub v1.CronJob
	if err := src.ConvertToHub(&hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Schedule != "0 * * * SUN" || hub.APIVersion != "batch.tutorial.kubebuilder.io/v1" {
		t.Errorf("schedule %q apiVersion %q", hub.Spec.Schedule, hub.APIVersion)
	}
	if got := hub.Annotations[v2.UnsetFieldsAnnotation]; got != "hour,dayOfMonth,month" {
		t.Errorf("unset fields annotation %q", got)
	}
}

func TestConversion_RoundTripsThroughTheOtherVersionGiveBackWhatWasWritten(t *testing.T) {
	v1s := []*v1.CronJob{
		hubCronJob("*/5 * * * *", nil),
		hubCronJob("@hourly", map[string]string{"keep": "me"}),
		hubCronJob("@every 1h30m", nil),
		hubCronJob("CRON_TZ=UTC 0 6 * * *", nil),
		hubCronJob("0  6 * * *", nil),
		hubCronJob("", nil),
	}
	for _, orig := range v1s {
		var mid v2.CronJob
		var back v1.CronJob
		if err := mid.ConvertFromHub(orig); err != nil {
			t.Fatal(err)
		}
		if err := mid.ConvertToHub(&back); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(orig, &back) {
			t.Errorf("v1 %q -> v2 %v (annotations %v) -> v1 %q (annotations %v)", orig.Spec.Schedule, mid.Spec.Schedule, mid.Annotations, back.Spec.Schedule, back.Annotations)
		}
	}
	v2s := []v2.CronSchedule{
		{},
		{Minute: field("0")},
		{Minute: field("*"), Hour: field("*/2")},
		{Minute: field("0"), Hour: field("0"), DayOfMonth: field("1"), Month: field("1"), DayOfWeek: field("*")},
	}
	for _, s := range v2s {
		orig := &v2.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch.tutorial.kubebuilder.io/v2", Kind: "CronJob"}, ObjectMeta: metav1.ObjectMeta{Name: "b"}}
		orig.Spec.Schedule = s
		var mid v1.CronJob
		var back v2.CronJob
		if err := orig.ConvertToHub(&mid); err != nil {
			t.Fatal(err)
		}
		if err := back.ConvertFromHub(&mid); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(orig, &back) {
			t.Errorf("v2 %v -> v1 %q (annotations %v) -> v2 %v (annotations %v)", s, mid.Spec.Schedule, mid.Annotations, back.Spec.Schedule, back.Annotations)
		}
	}
}

func TestConversion_ADescriptorShowsAsFieldsAndAnEditOfThemWins(t *testing.T) {
	var mid v2.CronJob
	if err := mid.ConvertFromHub(hubCronJob("@daily", nil)); err != nil {
		t.Fatal(err)
	}
	if got := mid.Spec.Schedule.String(); got != "0 0 * * *" || mid.Annotations[v2.V1ScheduleAnnotation] != "@daily" {
		t.Fatalf("@daily in v2: %q, annotations %v", got, mid.Annotations)
	}
	mid.Spec.Schedule.Hour = field("3")
	var back v1.CronJob
	if err := mid.ConvertToHub(&back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Schedule != "0 3 * * *" || back.Annotations != nil {
		t.Errorf("edited fields: schedule %q annotations %v, want \"0 3 * * *\" and none", back.Spec.Schedule, back.Annotations)
	}
}

func TestConversion_AnUnexpressibleScheduleIsKeptUntilTheFieldsAreSet(t *testing.T) {
	var mid v2.CronJob
	if err := mid.ConvertFromHub(hubCronJob("@every 1h30m", nil)); err != nil {
		t.Fatal(err)
	}
	mid.Spec.Schedule.Minute = field("*") // every minute, said explicitly
	var back v1.CronJob
	if err := mid.ConvertToHub(&back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Schedule != "* * * * *" {
		t.Errorf("schedule %q, want the fields' \"* * * * *\"", back.Spec.Schedule)
	}
}

// Both versions meet webhook's hub-and-spoke contract.
var (
	_ webhook.Hub         = &v1.CronJob{}
	_ webhook.Convertible = &v2.CronJob{}
)

func TestConvertTo_RefusesAnythingButTheHub(t *testing.T) {
	var cj v2.CronJob
	if err := cj.ConvertTo(&notHub{}); err == nil || !strings.Contains(err.Error(), "*v1.CronJob") {
		t.Errorf("ConvertTo(other) = %v, want an error naming the hub type", err)
	}
	if err := cj.ConvertFrom(&notHub{}); err == nil {
		t.Error("ConvertFrom(other) = nil, want an error")
	}
}

type notHub struct{ v1.CronJob }

func (*notHub) Hub() {}
