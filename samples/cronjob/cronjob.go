package cronjob

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	batchv2 "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v2"
)

const (
	// ControllerName names the controller in logs and metrics, and is the
	// field manager of its writes.
	ControllerName = "cronjob-controller"
	// Finalizer holds a CronJob being deleted until its Jobs are deleted.
	Finalizer = "batch.tutorial.kubebuilder.io/jobs"
	// JobOwnerIndex indexes Jobs by the name of the CronJob that controls
	// them, per namespace.
	JobOwnerIndex = "cronjob-owner"
	// DefaultWorkers is how many CronJobs are synced at once by default.
	DefaultWorkers = 2
)

// The rights the CronJob controller needs, for controller-gen's RBAC
// generator (make generate writes them to
// deploy/cronjob-controller/rbac/role.yaml): its informers list and watch
// CronJobs and Jobs; it adds and removes its finalizer (a JSON patch),
// writes the status through the subresource, creates Jobs (whose
// controller reference blocks the CronJob's deletion: update on
// cronjobs/finalizers, where the API server checks that) and deletes those
// beyond the history limits, those Replace replaces and, at deletion, all
// of a CronJob's. A failed clean-up is recorded as a Warning Event
// (through events.k8s.io, or core/v1 on a server without it). Reads go to
// the caches, so no get.
//
// +kubebuilder:rbac:groups=batch.tutorial.kubebuilder.io,resources=cronjobs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=batch.tutorial.kubebuilder.io,resources=cronjobs/status,verbs=update;patch
// +kubebuilder:rbac:groups=batch.tutorial.kubebuilder.io,resources=cronjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Scheme returns a new scheme with the built-in types and both versions
// of CronJob.
func Scheme() *runtime.Scheme { return kloop.NewScheme(batch.AddToScheme, batchv2.AddToScheme) }

// Options configures Setup. The zero value works.
type Options struct {
	// Workers is how many CronJobs are synced at once. Default
	// DefaultWorkers.
	Workers int
	// Clock tells the time that schedules are read at. Default the real
	// clock; tests give a fake one.
	Clock clock.PassiveClock
}

// Run runs the CronJob controller against the API server at cfg until ctx
// is done. opts.Name and opts.Scheme default to ControllerName and Scheme().
// The CronJob CRD must be installed (CRDYAML).
func Run(ctx context.Context, cfg *rest.Config, opts kloop.Options, o Options) error {
	opts.Name = cmp.Or(opts.Name, ControllerName)
	opts.Scheme = cmp.Or(opts.Scheme, Scheme())
	return kloop.Run(ctx, cfg, opts, func(app *kloop.App) error { return Setup(app, o) })
}

// Setup declares the CronJob controller in app, whose scheme must hold
// both versions of CronJob (Scheme() does).
func Setup(app *kloop.App, o Options) error {
	r := &Reconciler{
		App:      app,
		CronJobs: kloop.Objects[*batch.CronJob](app, kloop.ObjectsOptions{Resource: batch.Resource}),
		Jobs:     kloop.Objects[*batchv1.Job](app),
		Clock:    cmp.Or[clock.PassiveClock](o.Clock, clock.RealClock{}),
	}
	if err := r.Jobs.AddIndex(JobOwnerIndex, jobOwner); err != nil {
		return err
	}
	if app.WebhookServer() != nil {
		if err := kloop.NewWebhook(app, r.CronJobs).Defaulter(Default).Validator(Validator{}).Conversion().Complete(); err != nil {
			return err
		}
	}
	_, err := kloop.NewController(app, ControllerName, r.Reconcile).
		For(r.CronJobs).Owns(r.Jobs).Workers(cmp.Or(o.Workers, DefaultWorkers)).
		// A pass that creates a run's Job records it in the status on the
		// next pass, which the Job's event wakes: the controller must see
		// its own writes.
		WithOptions(func(o *controller.Options[cache.Key]) { o.ReconcileOwnWrites = true }).
		Complete()
	return err
}

// jobOwner indexes a Job under the name of the CronJob controlling it.
func jobOwner(j *batchv1.Job) []string {
	ref := metav1.GetControllerOf(j)
	if ref == nil || ref.Kind != batch.Kind.Kind || ref.APIVersion != batch.SchemeGroupVersion.String() {
		return nil
	}
	return []string{ref.Name}
}

// Reconciler syncs one CronJob (see the package documentation). Setup
// fills in its fields.
type Reconciler struct {
	App      *kloop.App
	CronJobs *kloop.Handle[*batch.CronJob]
	Jobs     *kloop.Handle[*batchv1.Job]
	Clock    clock.PassiveClock
}

// Reconcile syncs the CronJob at key.
func (r *Reconciler) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	cj, err := r.CronJobs.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	return r.CronJobs.Finalize(ctx, cj, Finalizer, r.sync, r.cleanup)
}

// jobsOf returns the Jobs cj controls, from the cache.
func (r *Reconciler) jobsOf(ctx context.Context, cj *batch.CronJob) ([]*batchv1.Job, error) {
	indexed, err := r.Jobs.ByIndex(ctx, cj.Namespace, JobOwnerIndex, cj.Name)
	if err != nil {
		return nil, err
	}
	jobs := indexed[:0:0]
	for _, j := range indexed {
		if metav1.IsControlledBy(j, cj) { // not a former CronJob's of that name
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// sync is the book's reconcile of a CronJob that is not being deleted.
func (r *Reconciler) sync(ctx context.Context, cj *batch.CronJob) (controller.Result, error) {
	log := controller.LoggerFrom(ctx)
	jobs, err := r.jobsOf(ctx, cj)
	if err != nil {
		return controller.Result{}, err
	}
	js := Classify(jobs)
	if err := r.writeStatus(ctx, cj, js); err != nil {
		return controller.Result{}, err
	}
	for _, j := range append(BeyondLimit(js.Failed, cj.Spec.FailedJobsHistoryLimit), BeyondLimit(js.Successful, cj.Spec.SuccessfulJobsHistoryLimit)...) {
		if err := r.deleteJob(ctx, j, "beyond the history limit"); err != nil {
			return controller.Result{}, err
		}
	}
	if Suspended(cj) {
		log.Debug("CronJob suspended: no new runs")
		return controller.Result{}, nil
	}
	sched, err := cron.ParseStandard(cj.Spec.Schedule)
	if err != nil {
		// The validating webhook refuses these; one stored without it
		// waits for a fix of its spec.
		return controller.Result{}, controller.TerminalError(fmt.Errorf("CronJob %s: spec.schedule %q: %w", cache.KeyOf(cj), cj.Spec.Schedule, err))
	}
	now := r.Clock.Now()
	last := js.LastScheduled
	if t := cj.Status.LastScheduleTime; t != nil && t.After(last) {
		last = t.Time
	}
	runs, err := DueRuns(sched, cj.CreationTimestamp.Time, last, cj.Spec.StartingDeadlineSeconds, now)
	if err != nil {
		return controller.Result{}, controller.TerminalError(fmt.Errorf("CronJob %s: %w", cache.KeyOf(cj), err))
	}
	next := controller.Result{RequeueAfter: runs.Next.Sub(now)}
	if runs.Missed.IsZero() {
		log.Debug("No run due", "next", runs.Next)
		return next, nil
	}
	switch Decide(concurrencyPolicy(cj), len(js.Active)) {
	case Skip:
		log.Info("Skipping a run: concurrency policy Forbid and a Job is active", "scheduled", runs.Missed, "active", len(js.Active))
		return next, nil
	case ReplaceActive:
		for _, j := range js.Active {
			if err := r.deleteJob(ctx, j, "replaced by a new run"); err != nil {
				return controller.Result{}, err
			}
		}
	}
	job := NewJob(cj, runs.Missed)
	if err := r.App.SetControllerReference(cj, job); err != nil {
		return controller.Result{}, err
	}
	_, err = r.Jobs.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		// Started already (by an earlier process whose Job the cache has
		// not shown yet): the name makes the create idempotent.
		log.Debug("The Job of the run exists already", "job", job.Name, "scheduled", runs.Missed)
	case err != nil:
		return controller.Result{}, fmt.Errorf("create Job %s for the run scheduled at %s: %w", job.Name, runs.Missed.Format(time.RFC3339), err)
	default:
		log.Info("Created the Job of a run", "job", job.Name, "scheduled", runs.Missed)
	}
	return next, nil
}

// writeStatus writes the active Jobs and the last schedule time, unless
// the status already says so. lastScheduleTime never goes back: with the
// Jobs of the latest run pruned, the missed runs are still counted from it.
func (r *Reconciler) writeStatus(ctx context.Context, cj *batch.CronJob, js Jobs) error {
	st := batch.CronJobStatus{LastScheduleTime: cj.Status.LastScheduleTime}
	for _, j := range js.Active {
		ref, err := r.App.ObjectReference(j)
		if err != nil {
			return err
		}
		st.Active = append(st.Active, ref)
	}
	if !js.LastScheduled.IsZero() && (st.LastScheduleTime == nil || js.LastScheduled.After(st.LastScheduleTime.Time)) {
		st.LastScheduleTime = &metav1.Time{Time: js.LastScheduled}
	}
	if equality.Semantic.DeepEqual(st, cj.Status) {
		return nil
	}
	changed := cj.DeepCopy()
	changed.Status = st
	_, _, err := r.CronJobs.WriteStatus(ctx, changed)
	return err
}

// deleteJob deletes j in the background: the garbage collector deletes its
// pods after it.
func (r *Reconciler) deleteJob(ctx context.Context, j *batchv1.Job, why string) error {
	controller.LoggerFrom(ctx).Info("Deleting a Job", "job", j.Name, "why", why)
	err := r.Jobs.Delete(ctx, j.Namespace, j.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s (%s): %w", j.Name, why, err)
	}
	return nil
}

// cleanup deletes the Jobs of a CronJob being deleted, in the background
// (the garbage collector deletes their pods after them); the finalizer
// comes off after it returns nil.
func (r *Reconciler) cleanup(ctx context.Context, cj *batch.CronJob) (controller.Result, error) {
	_, err := r.Jobs.DeleteControlledBy(ctx, cj)
	return controller.Result{}, err
}
