package cronjob

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
)

// ScheduledTimeAnnotation is set on every Job a CronJob creates: the run's
// scheduled time (RFC 3339). status.lastScheduleTime is read back from it.
const ScheduledTimeAnnotation = "batch.tutorial.kubebuilder.io/scheduled-at"

// MaxMissedRuns is how many missed runs the controller counts before it
// gives up on a CronJob (ErrTooManyMissedRuns), as the book does: a
// schedule with more is most likely a clock skew or a controller that was
// down for long, and starting the latest run would hide that.
const MaxMissedRuns = 100

// ErrTooManyMissedRuns is returned when more than MaxMissedRuns runs were
// missed since the last one.
var ErrTooManyMissedRuns = errors.New("too many missed start times (> 100): set or decrease spec.startingDeadlineSeconds, or check clock skew")

// Runs is what the schedule says at a moment: the latest run that was due
// and has not been started, if any, and when the next run is due.
type Runs struct {
	// Missed is the most recent scheduled time not yet run, zero if none.
	Missed time.Time
	// Next is the next scheduled time after now.
	Next time.Time
}

// DueRuns computes the runs of sched for a CronJob created at created,
// whose last run was scheduled at last (zero if none), at now. A run older
// than now minus startingDeadline (when set) is no longer due. More than
// MaxMissedRuns missed runs is ErrTooManyMissedRuns.
func DueRuns(sched cron.Schedule, created, last time.Time, startingDeadline *int64, now time.Time) (Runs, error) {
	earliest := created
	if !last.IsZero() {
		earliest = last
	}
	if startingDeadline != nil {
		if limit := now.Add(-time.Duration(*startingDeadline) * time.Second); limit.After(earliest) {
			earliest = limit
		}
	}
	runs := Runs{Next: sched.Next(now)}
	// Each step is one scheduled time, so a schedule's missed runs are
	// counted without walking its seconds.
	n := 0
	for t := sched.Next(earliest); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		runs.Missed = t
		if n++; n > MaxMissedRuns {
			return Runs{}, ErrTooManyMissedRuns
		}
	}
	return runs, nil
}

// Jobs are a CronJob's Jobs sorted by what they are doing.
type Jobs struct {
	Active, Successful, Failed []*batchv1.Job
	// LastScheduled is the latest scheduled time among the Jobs'
	// annotations, zero if none carries one.
	LastScheduled time.Time
}

// Classify sorts jobs into active, successful and failed (a Job is
// finished when its Complete or Failed condition is True), each oldest
// first, and finds the latest scheduled time.
func Classify(jobs []*batchv1.Job) Jobs {
	var js Jobs
	for _, j := range jobs {
		switch finished(j) {
		case "":
			js.Active = append(js.Active, j)
		case batchv1.JobComplete:
			js.Successful = append(js.Successful, j)
		default:
			js.Failed = append(js.Failed, j)
		}
		if t, ok := ScheduledTime(j); ok && t.After(js.LastScheduled) {
			js.LastScheduled = t
		}
	}
	for _, s := range [][]*batchv1.Job{js.Active, js.Successful, js.Failed} {
		slices.SortStableFunc(s, func(a, b *batchv1.Job) int { return startTime(a).Compare(startTime(b)) })
	}
	return js
}

// finished returns the condition that finished j (Complete or Failed), or
// "" while it runs.
func finished(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// ScheduledTime reads the scheduled time a Job carries in
// ScheduledTimeAnnotation.
func ScheduledTime(j *batchv1.Job) (time.Time, bool) {
	s, ok := j.Annotations[ScheduledTimeAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// startTime orders Jobs for pruning: the run's scheduled time (the order
// of the runs, on the controller's clock), else its start, else its
// creation.
func startTime(j *batchv1.Job) time.Time {
	if t, ok := ScheduledTime(j); ok {
		return t
	}
	if j.Status.StartTime != nil {
		return j.Status.StartTime.Time
	}
	return j.CreationTimestamp.Time
}

// BeyondLimit returns the oldest of jobs (sorted oldest first, as Classify
// leaves them) beyond the newest limit, those to delete; a nil limit keeps
// them all.
func BeyondLimit(jobs []*batchv1.Job, limit *int32) []*batchv1.Job {
	if limit == nil || len(jobs) <= int(*limit) {
		return nil
	}
	return jobs[:len(jobs)-int(max(*limit, 0))]
}

// Action is what to do about a due run.
type Action int

const (
	// Start the run's Job.
	Start Action = iota
	// Skip the run: concurrency policy Forbid and a Job is active.
	Skip
	// ReplaceActive deletes the active Jobs, then starts the run's Job.
	ReplaceActive
)

func (a Action) String() string {
	return [...]string{"Start", "Skip", "ReplaceActive"}[a]
}

// Decide applies the concurrency policy to a due run while active Jobs run.
func Decide(policy batch.ConcurrencyPolicy, active int) Action {
	switch {
	case active == 0:
		return Start
	case policy == batch.ForbidConcurrent:
		return Skip
	case policy == batch.ReplaceConcurrent:
		return ReplaceActive
	}
	return Start
}

// JobName is the name of the Job of the run scheduled at t: the CronJob's
// name and the run's Unix time, so a run is started once however often it
// is reconciled.
func JobName(cj *batch.CronJob, t time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, t.Unix())
}

// NewJob returns the Job of cj's run scheduled at t: the template's labels,
// annotations and spec, ScheduledTimeAnnotation, named JobName, in cj's
// namespace. The caller sets the controller reference.
func NewJob(cj *batch.CronJob, t time.Time) *batchv1.Job {
	tpl := cj.Spec.JobTemplate.DeepCopy()
	j := &batchv1.Job{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
	j.Name, j.Namespace, j.GenerateName = JobName(cj, t), cj.Namespace, ""
	if j.Annotations == nil {
		j.Annotations = map[string]string{}
	}
	j.Annotations[ScheduledTimeAnnotation] = t.UTC().Format(time.RFC3339)
	j.ResourceVersion, j.UID = "", ""
	return j
}

// Suspended reports whether cj is suspended.
func Suspended(cj *batch.CronJob) bool { return ptr.Deref(cj.Spec.Suspend, false) }

// concurrencyPolicy is cj's policy, Allow when unset.
func concurrencyPolicy(cj *batch.CronJob) batch.ConcurrencyPolicy {
	return cmp.Or(cj.Spec.ConcurrencyPolicy, batch.AllowConcurrent)
}
