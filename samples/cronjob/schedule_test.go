package cronjob_test

import (
	"errors"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/cronjob"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s string) time.Time {
	t, err := time.Parse("15:04:05", s)
	if err != nil {
		panic(err)
	}
	return time.Date(2026, 1, 1, t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

func TestDueRuns_FindsTheMostRecentMissedRunAndTheNext(t *testing.T) {
	everyMinute, _ := cron.ParseStandard("* * * * *")
	every5, _ := cron.ParseStandard("*/5 * * * *")
	cases := []struct {
		name          string
		sched         cron.Schedule
		created, last time.Time
		deadline      *int64
		now           time.Time
		missed, next  time.Time
	}{
		{"nothing due before the first run", everyMinute, at("12:00:00"), time.Time{}, nil, at("12:00:30"), time.Time{}, at("12:01:00")},
		{"the first run is due on the minute", everyMinute, at("12:00:00"), time.Time{}, nil, at("12:01:00"), at("12:01:00"), at("12:02:00")},
		{"the latest of several missed runs", every5, at("12:00:00"), time.Time{}, nil, at("12:17:00"), at("12:15:00"), at("12:20:00")},
		{"counted from the last run, not the creation", every5, at("11:00:00"), at("12:10:00"), nil, at("12:12:00"), time.Time{}, at("12:15:00")},
		{"a run since the last", every5, at("11:00:00"), at("12:10:00"), nil, at("12:15:01"), at("12:15:00"), at("12:20:00")},
		{"within the starting deadline", every5, at("12:00:00"), time.Time{}, ptr.To[int64](60), at("12:15:59"), at("12:15:00"), at("12:20:00")},
		{"past the starting deadline", every5, at("12:00:00"), time.Time{}, ptr.To[int64](60), at("12:16:01"), time.Time{}, at("12:20:00")},
		{"a deadline of 0 lets no run start, as in the book", every5, at("12:00:00"), time.Time{}, ptr.To[int64](0), at("12:15:00"), time.Time{}, at("12:20:00")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs, err := cronjob.DueRuns(c.sched, c.created, c.last, c.deadline, c.now)
			if err != nil {
				t.Fatal(err)
			}
			if !runs.Missed.Equal(c.missed) || !runs.Next.Equal(c.next) {
				t.Errorf("DueRuns = missed %v next %v, want missed %v next %v", runs.Missed, runs.Next, c.missed, c.next)
			}
		})
	}
}

func TestDueRuns_MoreThanAHundredMissedRunsIsAnErrorUnlessTheDeadlineBoundsThem(t *testing.T) {
	everyMinute, _ := cron.ParseStandard("* * * * *")
	now := at("14:00:00") // 120 runs since 12:00
	_, err := cronjob.DueRuns(everyMinute, at("12:00:00"), time.Time{}, nil, now)
	if !errors.Is(err, cronjob.ErrTooManyMissedRuns) {
		t.Fatalf("err = %v, want ErrTooManyMissedRuns", err)
	}
	runs, err := cronjob.DueRuns(everyMinute, at("12:00:00"), time.Time{}, ptr.To[int64](600), now)
	if err != nil || !runs.Missed.Equal(now) {
		t.Errorf("with a 10-minute deadline: %+v, %v; want the run at %v", runs, err, now)
	}
	// Exactly 100 is still fine.
	if _, err := cronjob.DueRuns(everyMinute, at("12:00:00"), time.Time{}, nil, at("13:40:00")); err != nil {
		t.Errorf("100 missed runs: %v", err)
	}
}

func job(name string, scheduled time.Time, cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		cronjob.ScheduledTimeAnnotation: scheduled.Format(time.RFC3339),
	}}}
	j.Status.StartTime = &metav1.Time{Time: scheduled}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
	}
	return j
}

func names(jobs []*batchv1.Job) []string {
	var ns []string
	for _, j := range jobs {
		ns = append(ns, j.Name)
	}
	return ns
}

func TestClassify_SortsJobsOldestFirstAndFindsTheLatestScheduledTime(t *testing.T) {
	failing := job("suspended-false", at("12:06:00"), batchv1.JobSuspended) // a True Suspended condition does not finish it
	jobs := []*batchv1.Job{
		job("s3", at("12:05:00"), batchv1.JobComplete),
		job("f1", at("12:01:00"), batchv1.JobFailed),
		job("a1", at("12:07:00"), ""),
		job("s1", at("12:02:00"), batchv1.JobComplete),
		failing,
		job("s2", at("12:03:00"), batchv1.JobComplete),
	}
	js := cronjob.Classify(jobs)
	if got := names(js.Active); len(got) != 2 || got[0] != "suspended-false" || got[1] != "a1" {
		t.Errorf("active = %v, want [suspended-false a1]", got)
	}
	if got := names(js.Successful); len(got) != 3 || got[0] != "s1" || got[2] != "s3" {
		t.Errorf("successful = %v, want [s1 s2 s3]", got)
	}
	if got := names(js.Failed); len(got) != 1 || got[0] != "f1" {
		t.Errorf("failed = %v, want [f1]", got)
	}
	if !js.LastScheduled.Equal(at("12:07:00")) {
		t.Errorf("LastScheduled = %v, want 12:07", js.LastScheduled)
	}
	if js := cronjob.Classify(nil); !js.LastScheduled.IsZero() {
		t.Errorf("no jobs: LastScheduled = %v, want zero", js.LastScheduled)
	}
}

func TestBeyondLimit_ReturnsTheOldestJobsBeyondTheLimit(t *testing.T) {
	jobs := []*batchv1.Job{job("1", at("12:01:00"), ""), job("2", at("12:02:00"), ""), job("3", at("12:03:00"), "")}
	cases := []struct {
		limit *int32
		want  []string
	}{
		{nil, nil}, {ptr.To[int32](5), nil}, {ptr.To[int32](3), nil},
		{ptr.To[int32](2), []string{"1"}}, {ptr.To[int32](0), []string{"1", "2", "3"}},
	}
	for _, c := range cases {
		got := names(cronjob.BeyondLimit(jobs, c.limit))
		if len(got) != len(c.want) || len(got) > 0 && got[len(got)-1] != c.want[len(c.want)-1] {
			t.Errorf("limit %v: %v, want %v", ptr.Deref(c.limit, -1), got, c.want)
		}
	}
}

func TestDecide_AppliesTheConcurrencyPolicy(t *testing.T) {
	cases := []struct {
		policy batch.ConcurrencyPolicy
		active int
		want   cronjob.Action
	}{
		{batch.AllowConcurrent, 0, cronjob.Start}, {batch.AllowConcurrent, 2, cronjob.Start},
		{batch.ForbidConcurrent, 0, cronjob.Start}, {batch.ForbidConcurrent, 1, cronjob.Skip},
		{batch.ReplaceConcurrent, 0, cronjob.Start}, {batch.ReplaceConcurrent, 1, cronjob.ReplaceActive},
		{"", 1, cronjob.Start},
	}
	for _, c := range cases {
		if got := cronjob.Decide(c.policy, c.active); got != c.want {
			t.Errorf("Decide(%q, %d) = %v, want %v", c.policy, c.active, got, c.want)
		}
	}
}

func TestNewJob_IsNamedForTheRunAndCarriesItsScheduledTime(t *testing.T) {
	cj := &batch.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: "ns"}}
	cj.Spec.JobTemplate.Labels = map[string]string{"app": "backup"}
	cj.Spec.JobTemplate.Spec.BackoffLimit = ptr.To[int32](2)
	j := cronjob.NewJob(cj, t0)
	if j.Name != "backup-1767268800" || j.Namespace != "ns" || j.Labels["app"] != "backup" || ptr.Deref(j.Spec.BackoffLimit, 0) != 2 {
		t.Errorf("job = %s/%s labels %v backoff %v", j.Namespace, j.Name, j.Labels, j.Spec.BackoffLimit)
	}
	if got, ok := cronjob.ScheduledTime(j); !ok || !got.Equal(t0) {
		t.Errorf("scheduled time = %v %v, want %v", got, ok, t0)
	}
	if cj.Spec.JobTemplate.Annotations != nil {
		t.Errorf("the template was changed: %v", cj.Spec.JobTemplate.Annotations)
	}
}
