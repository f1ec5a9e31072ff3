package foo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/conditions"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/record"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/workqueue"
)

// Names, event reasons and messages. The reasons and messages are
// sample-controller's, word for word.
const (
	// ControllerName names the controller in logs and metrics, the event
	// source and the field manager of its writes.
	ControllerName = "foo-controller"

	// SuccessSynced is the reason of the Normal event recorded after a
	// successful sync that created, repaired or deleted a Deployment, with
	// MessageResourceSynced.
	SuccessSynced         = "Synced"
	MessageResourceSynced = "Foo synced successfully"

	// ErrResourceExists is the reason of the Warning event recorded when
	// the Deployment a Foo names exists and is not controlled by the Foo;
	// MessageResourceExists is its message, formatted with the
	// Deployment's name.
	ErrResourceExists     = "ErrResourceExists"
	MessageResourceExists = "Resource %q already exists and is not managed by Foo"

	// DefaultWorkers is sample-controller's number of workers.
	DefaultWorkers = 2
	// StatusAfterCreate is how long after creating a Deployment a sync
	// writes the Foo's status at the latest, if no change of the
	// Deployment wakes it sooner.
	StatusAfterCreate = time.Second
	// NginxImage is the image of the Deployments' only container.
	NginxImage = "nginx:latest"
)

// ErrNoDeploymentName is the terminal error of a sync of a Foo without
// spec.deploymentName.
var ErrNoDeploymentName = errors.New("spec.deploymentName is empty, so there is no Deployment to manage; set it to have one created")

// ResourceExistsError is the error of a sync of a Foo whose Deployment
// exists but is controlled by something else. Its text is the Warning
// event's message. Name is the Deployment's.
type ResourceExistsError struct{ Name string }

func (e *ResourceExistsError) Error() string { return fmt.Sprintf(MessageResourceExists, e.Name) }

// Run runs the Foo controller against the API server at cfg until ctx is
// done, then stops after the syncs in flight and returns nil. opts.Name and
// opts.Scheme default to ControllerName and Scheme(). It waits for the Foo
// CRD (CRDYAML, or sample-controller's crd.yaml or
// crd-status-subresource.yaml): it sets opts.WaitForKinds, so until the CRD
// is installed, and whenever it is deleted, the controller holds and
// /readyz?verbose names Foo as waiting.
func Run(ctx context.Context, cfg *rest.Config, opts kloop.Options) error {
	opts.Name = cmp.Or(opts.Name, ControllerName)
	opts.Scheme = cmp.Or(opts.Scheme, Scheme())
	opts.WaitForKinds = true
	return kloop.Run(ctx, cfg, opts, func(app *kloop.App) error { return Setup(app, DefaultWorkers) })
}

// The rights the Foo controller needs, for controller-gen's RBAC generator
// (make generate writes them to deploy/foo-controller/rbac/role.yaml): its
// informers list and watch Foos and Deployments, it creates Deployments,
// repairs their drift by server-side apply (patch), deletes the one of a
// Foo's old name after a rename, writes Foos' status through the status
// subresource, and records Events (created, then patched for repeats)
// through events.k8s.io, or core/v1 on a server without it.
// Reads go to the informers' caches, never to the API server, so no get.
// A Foo CRD without a status subresource (sample-controller's plain
// crd.yaml) also needs update on foos; deploy/ installs the CRD with one.
//
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos,verbs=list;watch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/status,verbs=update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Scheme returns a new scheme with the kinds the sample reads and writes:
// Foo, apps/v1 (Deployments) and core/v1 (Pods, Events). It leaves out the
// other built-in kinds kloop.NewScheme registers, about 0.14 MB of heap a
// Foo controller never uses (the App's recorder and leader election have
// clients of their own, on client-go's scheme). A program that handles
// more kinds in the same App passes kloop.NewScheme(v1alpha1.AddToScheme).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Adding distinct groups to a new scheme cannot fail (only a type
	// registered under two kinds does); TestScheme checks it.
	_ = errors.Join(corev1.AddToScheme(s), appsv1.AddToScheme(s), v1alpha1.AddToScheme(s))
	return s
}

// Setup declares the Foo controller, with workers workers, in app, whose
// scheme must hold Foo (Scheme() does). app.Run runs it.
func Setup(app *kloop.App, workers int) error {
	r := &Reconciler{
		Foos:        kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource}),
		Deployments: kloop.Objects[*appsv1.Deployment](app).WithTransform(LeanDeployment),
		Recorder:    app.Recorder(),
		Logger:      app.Logger().With("controller", ControllerName),
	}
	_, err := kloop.NewController(app, ControllerName, r.Reconcile).
		For(r.Foos).Owns(r.Deployments).Workers(workers).WithOptions(sampleControllerRetries).Complete()
	return err
}

// RateLimiter is sample-controller's: per-key back-off from 5 ms to
// 1000 s, and 50 retries a second overall (burst 300).
func RateLimiter() workqueue.RateLimiter[cache.Key] {
	return workqueue.NewControllerRateLimiter[cache.Key](5*time.Millisecond, 1000*time.Second, 50, 300, nil)
}

// sampleControllerRetries gives the controller RateLimiter.
func sampleControllerRetries(o *controller.Options[cache.Key]) { o.RateLimiter = RateLimiter() }

// Reconciler syncs one Foo (see the package documentation). Its fields are
// its dependencies; Setup fills them in.
type Reconciler struct {
	// Foos and Deployments read the App's caches, after waiting for its
	// own writes, and write to the API server.
	Foos        *kloop.Handle[*v1alpha1.Foo]
	Deployments *kloop.Handle[*appsv1.Deployment]
	Recorder    record.EventRecorder
	Logger      *slog.Logger
}

// Reasons of the Ready condition.
const (
	ReasonDeploymentNameMissing = "DeploymentNameMissing"
	ReasonDeploymentNotOwned    = "DeploymentNotOwned"
	ReasonDeploymentInvalid     = "DeploymentInvalid"
	ReasonDeploymentProgressing = "DeploymentProgressing"
	ReasonDeploymentAvailable   = "DeploymentAvailable"
)

// Reconcile syncs the Foo at key.
func (r *Reconciler) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	foo, err := r.Foos.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) || err == nil && foo.DeletionTimestamp != nil {
		// Its Deployment is being (or has been) garbage-collected: one
		// made now would only be collected again, and would hold up a
		// foreground deletion of the Foo.
		r.Logger.Debug("Foo gone or being deleted; its Deployment is left to the garbage collector", "key", key.String())
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if foo.Spec.DeploymentName == "" {
		err := fmt.Errorf("Foo %s: %w", key, ErrNoDeploymentName)
		return controller.Result{}, r.fail(ctx, foo, ReasonDeploymentNameMissing, ReasonDeploymentNameMissing, ErrNoDeploymentName, controller.TerminalError(err))
	}

	dep, err := r.Deployments.Get(ctx, key.Namespace, foo.Spec.DeploymentName)
	created := apierrors.IsNotFound(err)
	if err != nil && !created {
		return controller.Result{}, err
	} else if !created && !metav1.IsControlledBy(dep, foo) {
		err := &ResourceExistsError{Name: dep.Name}
		return controller.Result{}, r.fail(ctx, foo, ErrResourceExists, ReasonDeploymentNotOwned, err, err)
	}
	// Server-side apply creates the Deployment, or restores what the
	// controller owns and leaves what others added on the one found to be
	// this Foo's; its managedFields name foo-controller's Apply.
	dep, repaired, err := r.Deployments.Repair(ctx, dep, NewDeployment(foo))
	if apierrors.IsInvalid(err) { // such as a deploymentName that is no object name: terminal
		return controller.Result{}, r.fail(ctx, foo, ReasonDeploymentInvalid, ReasonDeploymentInvalid, err, err)
	} else if err != nil {
		return controller.Result{}, err
	}
	if created {
		// Just created: nothing yet observed to report; the next sync,
		// woken by the Deployment's first status (or StatusAfterCreate
		// later), writes the Foo's status.
		r.Recorder.Event(foo, corev1.EventTypeNormal, SuccessSynced, MessageResourceSynced)
		return controller.Result{RequeueAfter: StatusAfterCreate}, nil
	}
	ready, reason, deleted := metav1.ConditionFalse, ReasonDeploymentProgressing, 0
	if available(dep) {
		ready, reason = metav1.ConditionTrue, ReasonDeploymentAvailable
		// After a rename of spec.deploymentName, the Deployments of the
		// old names go once the new one is available.
		if deleted, err = r.Deployments.DeleteControlledBy(ctx, foo, dep.Name); err != nil {
			return controller.Result{}, err
		}
	}
	wrote, err := r.writeStatus(ctx, foo, dep.Status.AvailableReplicas, ready, reason, fmt.Sprintf("%d of %d replicas available", dep.Status.AvailableReplicas, ptr.Deref(dep.Spec.Replicas, 1)))
	if err != nil {
		return controller.Result{}, err
	}
	// Synced only after the sync acted on a Deployment (sample-controller
	// records it on every sync); a status change shows in the status.
	r.Logger.Debug("Foo synced", "key", key.String(), "rv", foo.ResourceVersion, "changed", repaired || deleted > 0 || wrote)
	if repaired || deleted > 0 {
		r.Recorder.Event(foo, corev1.EventTypeNormal, SuccessSynced, MessageResourceSynced)
	}
	return controller.Result{}, nil
}

// fail makes a problem visible: Ready=False with the reason and the
// problem, in the status, and, as the controller records every failed
// sync's error, a Warning event with the reason event. It returns err.
func (r *Reconciler) fail(ctx context.Context, foo *v1alpha1.Foo, event, reason string, problem, err error) error {
	_, serr := r.writeStatus(ctx, foo, foo.Status.AvailableReplicas, metav1.ConditionFalse, reason, problem.Error())
	return failure{event, errors.Join(err, serr)}
}

// failure is a failed sync's error, whose Warning event (see
// kloop.NewController) has the reason.
type failure struct {
	reason string
	error
}

func (f failure) Unwrap() error       { return f.error }
func (f failure) EventReason() string { return f.reason }

// available reports whether all of dep's replicas are available in its
// latest rollout.
func available(dep *appsv1.Deployment) bool {
	return dep.Status.ObservedGeneration >= dep.Generation && dep.Status.AvailableReplicas >= ptr.Deref(dep.Spec.Replicas, 1) &&
		dep.Status.UpdatedReplicas >= ptr.Deref(dep.Spec.Replicas, 1)
}

// writeStatus writes the Foo's status (available replicas, observed
// generation, the Ready condition) unless it is already so, and reports
// whether it wrote (see kloop.Handle.WriteStatus: a status the CRD's
// schema pruned is not written again).
func (r *Reconciler) writeStatus(ctx context.Context, foo *v1alpha1.Foo, availableReplicas int32, ready metav1.ConditionStatus, reason, message string) (bool, error) {
	changed := cache.Copy(foo)
	changed.Status.AvailableReplicas, changed.Status.ObservedGeneration = availableReplicas, foo.Generation
	conditions.Set(&changed.Status.Conditions, foo, metav1.Condition{Type: "Ready", Status: ready, Reason: reason, Message: message})
	_, wrote, err := r.Foos.WriteStatus(ctx, changed)
	return wrote, err
}

// NewDeployment returns the apply configuration of the Deployment a Foo
// asks for: named spec.deploymentName in the Foo's namespace, controlled
// by the Foo, with spec.replicas replicas (unset: the API server's default,
// 1) of one nginx container, and pods labelled app=nginx, controller=<Foo's
// name>, the labels its selector matches. It sets only these fields, which
// are the ones foo-controller owns (and repairs) on the Deployment.
func NewDeployment(foo *v1alpha1.Foo) *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{"app": "nginx", "controller": foo.Name}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(labels).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("nginx").WithImage(NginxImage))))
	if foo.Spec.Replicas != nil {
		spec.WithReplicas(*foo.Spec.Replicas)
	}
	return appsv1ac.Deployment(foo.Spec.DeploymentName, foo.Namespace).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(v1alpha1.Kind.GroupVersion().String()).WithKind(v1alpha1.Kind.Kind).
			WithName(foo.Name).WithUID(foo.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(spec)
}
