package cronjob_test

import (
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/kloopfake"
	"github.com/kloop-dev/kloop/samples/cronjob"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
)

// TestReconcile_InMemory runs the CronJob controller's Reconcile, as
// written, on an App whose API server is kloopfake's in-memory one: no
// control plane, so it runs under -short too. It walks one CronJob through
// its life: the finalizer goes on, the due run's Job is created with the
// CronJob as its controller, the status names it, a conflicting status
// write fails the reconcile and the next one succeeds, and a delete runs
// the cleanup before the CronJob goes.
func TestReconcile_InMemory(t *testing.T) {
	began := time.Now()
	reconcileInMemory(t)
	t.Logf("in-memory: five reconciles and the App's start and stop took %v", time.Since(began))
}

// BenchmarkReconcile_InMemory is TestReconcile_InMemory's cost, the whole
// unit test (server, App, caches, five reconciles), per run:
//
//	go test -run '^$' -bench Reconcile_InMemory ./samples/cronjob
func BenchmarkReconcile_InMemory(b *testing.B) {
	for b.Loop() {
		reconcileInMemory(b)
	}
}

func reconcileInMemory(t testing.TB) {
	ctx := t.Context()
	const ns, name = "default", "nightly"
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(created.Add(90 * time.Minute)) // the 01:00 run is due
	cj := &batch.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: batch.CronJobSpec{
			Schedule: "@hourly",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "run", Image: "busybox"}},
			}}}},
		},
	}
	srv, err := kloopfake.NewServer(kloopfake.Options{Scheme: cronjob.Scheme(), Objects: []runtime.Object{cj}})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: cronjob.ControllerName, Scheme: cronjob.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Setup declares the handles and the Job index as the program does;
	// the test calls Reconcile itself instead of running the controller.
	if err := cronjob.Setup(app, cronjob.Options{Clock: clock}); err != nil {
		t.Fatal(err)
	}
	r := &cronjob.Reconciler{
		App:      app,
		CronJobs: kloop.Objects[*batch.CronJob](app, kloop.ObjectsOptions{Resource: batch.Resource}),
		Jobs:     kloop.Objects[*batchv1.Job](app),
		Clock:    clock,
	}
	stop, err := kloopfake.Start(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	key := cache.Key{Namespace: ns, Name: name}
	stored := func() *batch.CronJob {
		t.Helper()
		got, err := r.CronJobs.Resource().Get(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// 1: the finalizer goes on, nothing else.
	if _, err := r.Reconcile(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := stored(); len(got.Finalizers) != 1 || got.Finalizers[0] != cronjob.Finalizer {
		t.Fatalf("finalizers after the first reconcile: %v, want [%s]", got.Finalizers, cronjob.Finalizer)
	}

	// 2: the 01:00 run's Job, controlled by the CronJob; the next run is
	// at 02:00.
	res, err := r.Reconcile(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 30*time.Minute {
		t.Errorf("RequeueAfter %v, want 30m (to the 02:00 run)", res.RequeueAfter)
	}
	jobs, _, err := r.Jobs.Resource().List(ctx, ns, metav1.ListOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Jobs after the run was due: %d, %v; want 1", len(jobs), err)
	}
	job := jobs[0]
	owner := stored()
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != owner.UID || ref.Kind != "CronJob" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("Job %s controller reference %+v, want the CronJob's (uid %s) blocking its deletion", job.Name, job.OwnerReferences, owner.UID)
	}
	if at, ok := cronjob.ScheduledTime(job); !ok || !at.Equal(created.Add(time.Hour)) {
		t.Errorf("Job %s is for the run at %v, want %v", job.Name, at, created.Add(time.Hour))
	}

	// 3: the status write (an apply: a patch of /status) meets a conflict
	// (another writer got there first): the reconcile fails with it,
	// changing nothing, so the controller would retry.
	srv.Intercept(func(req kloopfake.Request) error {
		if (req.Verb == "update" || req.Verb == "patch") && req.Subresource == "status" {
			return apierrors.NewConflict(req.Resource.GroupResource(), req.Name, errors.New("the object has been modified"))
		}
		return nil
	})
	if _, err := r.Reconcile(ctx, key); !apierrors.IsConflict(err) {
		t.Fatalf("reconcile whose status write conflicts: %v, want the Conflict", err)
	}
	if got := stored(); len(got.Status.Active) != 0 {
		t.Fatalf("status after the conflict: %+v, want unchanged", got.Status)
	}
	srv.Intercept(nil)

	// 4: the retry writes the status: the active Job and the last run.
	if _, err := r.Reconcile(ctx, key); err != nil {
		t.Fatal(err)
	}
	st := stored().Status
	if len(st.Active) != 1 || st.Active[0].Name != job.Name || st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(created.Add(time.Hour)) {
		t.Errorf("status %+v, want Job %s active and the last run at %v", st, job.Name, created.Add(time.Hour))
	}
	if jobs, _ := r.Jobs.List(ctx, ns, labels.Everything()); len(jobs) != 1 {
		t.Errorf("%d Jobs after the retry, want still 1", len(jobs))
	}

	// 5: a delete waits on the finalizer; the reconcile deletes the Jobs
	// and takes the finalizer off, and the CronJob is gone.
	if err := r.CronJobs.Delete(ctx, ns, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got.DeletionTimestamp == nil {
		t.Fatal("the CronJob has no deletionTimestamp after the delete, with its finalizer on")
	}
	if _, err := r.Reconcile(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CronJobs.Resource().Get(ctx, ns, name); !apierrors.IsNotFound(err) {
		t.Errorf("the CronJob after its cleanup: %v, want NotFound", err)
	}
	if _, err := r.Jobs.Resource().Get(ctx, ns, job.Name); !apierrors.IsNotFound(err) {
		t.Errorf("Job %s after the CronJob's cleanup: %v, want NotFound", job.Name, err)
	}
}
