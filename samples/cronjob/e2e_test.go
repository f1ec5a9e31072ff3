package cronjob_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/cronjob"
	batchac "github.com/kloop-dev/kloop/samples/cronjob/apis/applyconfiguration/batch/v1"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// harness is one namespace of the shared control plane with the CronJob
// CRD and a CronJob controller of its own, whose clock the test moves.
type harness struct {
	t     *testing.T
	env   *testenv.Env
	kc    kubernetes.Interface
	cjs   *client.Resource[*batch.CronJob]
	dyn   dynamic.ResourceInterface // CronJobs (v1) of the namespace, to watch
	ns    string
	clock *clocktesting.FakeClock
	logs  *await.Buffer
	pokes int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := newCluster(t)
	h.run(kloop.Options{}, nil)
	return h
}

// newCluster is newHarness without the controller.
func newCluster(t *testing.T) *harness {
	t.Helper()
	e := controlPlane.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(ctx, e.Config, cronjob.CRDYAML); err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(e.Config)
	c, err := client.New(e.Config, client.Options{Scheme: cronjob.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	cjs, err := client.NewResource[*batch.CronJob](c, batch.Resource)
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.NewNamespace(t, kc, "cronjob")
	h := &harness{
		t: t, env: e, kc: kc, cjs: cjs, ns: ns, logs: &await.Buffer{},
		dyn:   dynamic.NewForConfigOrDie(e.Config).Resource(batch.Resource).Namespace(ns),
		clock: clocktesting.NewFakeClock(time.Now()),
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", h.logs)
		}
	})
	return h
}

// run runs the controller on h's namespace and clock until the test ends;
// setup, if given, sees the App first.
func (h *harness) run(opts kloop.Options, setup func(*kloop.App)) {
	opts.Namespace, opts.Registry = h.ns, prometheus.NewRegistry()
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Scheme = cronjob.Scheme()
	await.Run(h.t, "the CronJob controller", func(ctx context.Context) error {
		return kloop.Run(ctx, h.env.Config, opts, func(app *kloop.App) error {
			if setup != nil {
				setup(app)
			}
			return cronjob.Setup(app, cronjob.Options{Clock: h.clock})
		})
	})
}

func newCronJobSpec(name, schedule string, jobSpec batchv1.JobSpec) *batch.CronJob {
	cj := &batch.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.CronJobSpec{Schedule: schedule}}
	cj.Spec.JobTemplate.Spec = jobSpec
	return cj
}

// podJob is a Job spec of one pod that never runs (no kubelet): the Job
// stays active.
func podJob() batchv1.JobSpec {
	return batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
	}}}
}

// doneJob is a Job spec of no completions: the Job controller marks it
// Complete at once, without pods.
func doneJob() batchv1.JobSpec {
	s := podJob()
	s.Completions, s.Parallelism = ptr.To[int32](0), ptr.To[int32](0)
	return s
}

func (h *harness) create(cj *batch.CronJob) *batch.CronJob {
	h.t.Helper()
	cj.Namespace = h.ns
	got, err := h.cjs.Create(h.t.Context(), cj)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// runAt moves the clock to just after the run scheduled at t and pokes the
// CronJob (an annotation), whose controller would otherwise wait on the
// real clock for its requeue.
func (h *harness) runAt(name string, t time.Time) {
	h.t.Helper()
	h.clock.SetTime(t.Add(time.Second))
	h.pokes++
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.kloop.dev/poke":%q}}}`, strconv.Itoa(h.pokes))
	if _, err := h.cjs.Patch(h.t.Context(), h.ns, name, types.MergePatchType, []byte(patch), client.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// firstRun is the first run of an every-minute schedule after cj's
// creation.
func firstRun(cj *batch.CronJob) time.Time {
	return cj.CreationTimestamp.Truncate(time.Minute).Add(time.Minute)
}

// jobsOf lists the Jobs cj controls, by name.
func (h *harness) jobsOf(ctx context.Context, cj *batch.CronJob) (map[string]*batchv1.Job, error) {
	list, err := h.kc.BatchV1().Jobs(h.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	jobs := map[string]*batchv1.Job{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], cj) {
			jobs[list.Items[i].Name] = &list.Items[i]
		}
	}
	return jobs, nil
}

// untilJobs waits until cond holds for cj's Jobs, checking after each
// change of a Job in the namespace.
func (h *harness) untilJobs(what string, cj *batch.CronJob, cond func(map[string]*batchv1.Job) bool) {
	h.t.Helper()
	await.Watched(h.t, what, h.kc.BatchV1().Jobs(h.ns), metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
		jobs, err := h.jobsOf(ctx, cj)
		return err == nil && cond(jobs), err
	})
}

// untilCronJob waits until cond holds for the CronJob.
func (h *harness) untilCronJob(what, name string, cond func(*batch.CronJob) bool) *batch.CronJob {
	h.t.Helper()
	var got *batch.CronJob
	await.Watched(h.t, what, h.dyn, metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
		cj, err := h.cjs.Get(ctx, h.ns, name)
		if err != nil {
			return false, err
		}
		got = cj
		return cond(cj), nil
	})
	return got
}

func complete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestCronJob_CreatesTheJobOfAScheduledRunAndReportsItActive(t *testing.T) {
	h := newHarness(t)
	cj := h.create(newCronJobSpec("every-minute", "* * * * *", podJob()))
	h.untilCronJob("the finalizer", cj.Name, func(cj *batch.CronJob) bool { return slices.Contains(cj.Finalizers, cronjob.Finalizer) })
	run := firstRun(cj)
	name := cronjob.JobName(cj, run)
	h.untilJobs("no Job before the first run", cj, func(jobs map[string]*batchv1.Job) bool { return len(jobs) == 0 })

	h.runAt(cj.Name, run)
	h.untilJobs("the Job of the first run", cj, func(jobs map[string]*batchv1.Job) bool { return jobs[name] != nil })
	jobs, err := h.jobsOf(t.Context(), cj)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := cronjob.ScheduledTime(jobs[name]); !ok || !at.Equal(run) || len(jobs) != 1 {
		t.Errorf("Job %s scheduled at %v (%v), %d Jobs; want %v and one Job", name, at, ok, len(jobs), run)
	}
	got := h.untilCronJob("status.active and lastScheduleTime", cj.Name, func(cj *batch.CronJob) bool {
		return len(cj.Status.Active) == 1 && cj.Status.LastScheduleTime != nil
	})
	if a := got.Status.Active[0]; a.Name != name || a.Kind != "Job" || a.APIVersion != "batch/v1" || a.Namespace != h.ns || a.UID != jobs[name].UID {
		t.Errorf("status.active[0] = %+v, want Job %s", a, name)
	}
	if !got.Status.LastScheduleTime.Time.Equal(run) {
		t.Errorf("lastScheduleTime = %v, want %v", got.Status.LastScheduleTime, run)
	}

	// Reconciled again within the same minute: still one Job.
	h.runAt(cj.Name, run.Add(10*time.Second))
	h.untilCronJob("the poke seen", cj.Name, func(c *batch.CronJob) bool { return c.Annotations["test.kloop.dev/poke"] == "2" })
	if jobs, err := h.jobsOf(t.Context(), cj); err != nil || len(jobs) != 1 {
		t.Errorf("%d Jobs (%v) after a second look at the same run, want 1", len(jobs), err)
	}
}

func TestCronJob_KeepsOnlyTheHistoryLimitOfSuccessfulJobs(t *testing.T) {
	h := newHarness(t)
	cj := newCronJobSpec("history", "* * * * *", doneJob())
	cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	cj = h.create(cj)
	run := firstRun(cj)
	for i := range 3 {
		at := run.Add(time.Duration(i) * time.Minute)
		h.runAt(cj.Name, at)
		name := cronjob.JobName(cj, at)
		h.untilJobs("Job "+name+" complete, and only it", cj, func(jobs map[string]*batchv1.Job) bool {
			return len(jobs) == 1 && jobs[name] != nil && complete(jobs[name])
		})
	}
	got := h.untilCronJob("lastScheduleTime of the third run, nothing active", cj.Name, func(c *batch.CronJob) bool {
		return c.Status.LastScheduleTime != nil && c.Status.LastScheduleTime.Time.Equal(run.Add(2*time.Minute)) && len(c.Status.Active) == 0
	})
	if got.Status.LastScheduleTime == nil {
		t.Fatal("no lastScheduleTime")
	}
}

func TestCronJob_DeletionDeletesItsJobsAndPodsBeforeTheFinalizerLetsItGo(t *testing.T) {
	h := newHarness(t)
	cj := h.create(newCronJobSpec("deleted", "* * * * *", podJob()))
	run := firstRun(cj)
	h.untilCronJob("the finalizer", cj.Name, func(cj *batch.CronJob) bool { return slices.Contains(cj.Finalizers, cronjob.Finalizer) })
	h.runAt(cj.Name, run)
	name := cronjob.JobName(cj, run)
	pods := metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name}
	await.Watched(t, "the Job's pod", h.kc.CoreV1().Pods(h.ns), pods, func(ctx context.Context) (bool, error) {
		l, err := h.kc.CoreV1().Pods(h.ns).List(ctx, pods)
		return err == nil && len(l.Items) == 1, err
	})

	if err := h.cjs.Delete(t.Context(), h.ns, cj.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Watched(t, "the CronJob gone", h.dyn, metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
		_, err := h.cjs.Get(ctx, h.ns, cj.Name)
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		// The finalizer came off after the clean-up: its Jobs are gone.
		jobs, err := h.jobsOf(ctx, cj)
		if err == nil && len(jobs) > 0 {
			t.Errorf("the CronJob is gone but its Jobs are not: %v", jobs)
		}
		return true, err
	})
	await.Watched(t, "the Job's pod gone", h.kc.CoreV1().Pods(h.ns), pods, func(ctx context.Context) (bool, error) {
		l, err := h.kc.CoreV1().Pods(h.ns).List(ctx, pods)
		return err == nil && len(l.Items) == 0, err
	})
}

func TestCronJob_ForbidSkipsARunWhileAJobIsActiveAndReplaceDeletesIt(t *testing.T) {
	h := newHarness(t)
	cj := newCronJobSpec("overlap", "* * * * *", podJob())
	cj.Spec.ConcurrencyPolicy = batch.ForbidConcurrent
	cj = h.create(cj)
	run := firstRun(cj)
	h.runAt(cj.Name, run)
	first := cronjob.JobName(cj, run)
	h.untilJobs("the first run's Job", cj, func(jobs map[string]*batchv1.Job) bool { return jobs[first] != nil })

	h.runAt(cj.Name, run.Add(time.Minute))
	await.Until(t, "the second run skipped", h.logs.Changed, func() bool {
		return strings.Contains(h.logs.String(), "Skipping a run: concurrency policy Forbid")
	})
	if jobs, err := h.jobsOf(t.Context(), cj); err != nil || len(jobs) != 1 || jobs[first] == nil {
		t.Errorf("Jobs after the skipped run: %v (%v), want only %s", slices.Collect(maps.Keys(jobs)), err, first)
	}

	// An apply configuration (make generate writes them from the API
	// types) sends only the field it sets; forced, as the field was
	// written by create.
	replace := batchac.CronJob(cj.Name, h.ns).WithSpec(batchac.CronJobSpec().WithConcurrencyPolicy(batch.ReplaceConcurrent))
	if _, err := h.cjs.Apply(t.Context(), replace, client.PatchOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	third := cronjob.JobName(cj, run.Add(2*time.Minute))
	h.runAt(cj.Name, run.Add(2*time.Minute))
	h.untilJobs("the first run's Job replaced by the third's", cj, func(jobs map[string]*batchv1.Job) bool {
		return len(jobs) == 1 && jobs[third] != nil
	})
}
