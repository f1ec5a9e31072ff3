package foo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/watcher"
	"github.com/kloop-dev/kloop/workqueue"
)

// Names, event reasons and messages. The reasons and messages are
// sample-controller's, word for word.
const (
	// ControllerName names the controller in logs and metrics, the event
	// source and the field manager of its writes.
	ControllerName = "foo-controller"

	// SuccessSynced is the reason of the Normal event recorded after a
	// successful sync that changed something, with MessageResourceSynced.
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
	// NginxImage is the image of the Deployments' only container.
	NginxImage = "nginx:latest"
)

// ErrNoDeploymentName is the terminal error of a sync of a Foo without
// spec.deploymentName.
var ErrNoDeploymentName = errors.New("spec.deploymentName is empty, so there is no Deployment to manage; set it to have one created")

// ResourceExistsError is the error of a sync of a Foo whose Deployment
// exists but is controlled by something else. Its text is the Warning
// event's message.
type ResourceExistsError struct {
	Name string // the Deployment's
}

func (e *ResourceExistsError) Error() string { return fmt.Sprintf(MessageResourceExists, e.Name) }

// Run runs the Foo controller against the API server at cfg until ctx is
// done, then stops after the syncs in flight and returns nil. opts.Name and
// opts.Scheme default to ControllerName and Scheme(). The Foo CRD must be
// installed (CRDYAML, or sample-controller's crd.yaml or
// crd-status-subresource.yaml); until it is, Run fails after the
// controller's sync timeout, naming the Foo informer and the API server's
// answer.
func Run(ctx context.Context, cfg *rest.Config, opts kloop.Options) error {
	if opts.Name == "" {
		opts.Name = ControllerName
	}
	if opts.Scheme == nil {
		opts.Scheme = Scheme()
	}
	app, err := kloop.New(cfg, opts)
	if err != nil {
		return err
	}
	if err := Setup(app, DefaultWorkers); err != nil {
		return err
	}
	return app.Run(ctx)
}

// The rights the Foo controller needs, for controller-gen's RBAC generator
// (make generate writes them to deploy/foo-controller/rbac/role.yaml): its
// informers list and watch Foos and Deployments, it creates Deployments,
// repairs their drift by server-side apply (patch), deletes the one of a
// Foo's old name after a rename, writes Foos' status through the status
// subresource, and records Events (created, then patched for repeats).
// Reads go to the informers' caches, never to the API server, so no get.
// A Foo CRD without a status subresource (sample-controller's plain
// crd.yaml) also needs update on foos; deploy/ installs the CRD with one.
//
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos,verbs=list;watch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Setup declares the Foo controller, with workers workers, in app, whose
// scheme must hold Foo (Scheme() does). app.Run runs it.
func Setup(app *kloop.App, workers int) error {
	r := &Reconciler{
		Foos:        kloop.Objects[*v1alpha1.Foo](app, kloop.WithResource(v1alpha1.Resource)),
		Deployments: kloop.Objects[*appsv1.Deployment](app),
		Recorder:    app.Recorder(),
		Logger:      app.Logger().With("controller", ControllerName),
	}
	if r.Deployments.Err() == nil {
		// The cache keeps only what Reconcile reads of a Deployment.
		if err := r.Deployments.Informer().SetTransform(LeanDeployment); err != nil {
			return err
		}
	}
	_, err := kloop.NewController(app, ControllerName, r.Reconcile).
		For(r.Foos).Owns(r.Deployments).Workers(workers).RateLimiter(RateLimiter()).Complete()
	return err
}

// RateLimiter is sample-controller's: per-key back-off from 5 ms to
// 1000 s, and 50 retries a second overall (burst 300).
func RateLimiter() workqueue.RateLimiter[cache.Key] {
	return workqueue.NewMaxOfRateLimiter[cache.Key](
		workqueue.NewExponentialRateLimiter[cache.Key](5*time.Millisecond, 1000*time.Second),
		workqueue.NewBucketRateLimiter[cache.Key](50, 300, clock.RealClock{}),
	)
}

// Recorder records events; *record.Recorder is one.
type Recorder interface {
	Event(obj watcher.Object, eventType, reason, message string)
}

// Reconciler syncs one Foo (see the package documentation). Its fields are
// its dependencies; Setup fills them in.
type Reconciler struct {
	// Foos and Deployments read the App's caches, after waiting for its
	// own writes, and write to the API server.
	Foos        *kloop.Handle[*v1alpha1.Foo]
	Deployments *kloop.Handle[*appsv1.Deployment]
	Recorder    Recorder
	Logger      *slog.Logger

	written sync.Map // cache.Key → written
}

// Reasons of the Ready condition.
const (
	ReasonDeploymentNameMissing = "DeploymentNameMissing"
	ReasonDeploymentNotOwned    = "DeploymentNotOwned"
	ReasonDeploymentProgressing = "DeploymentProgressing"
	ReasonDeploymentAvailable   = "DeploymentAvailable"
)

// Reconcile syncs the Foo at key.
func (r *Reconciler) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	log := r.Logger.With("key", key.String())
	foo, err := r.Foos.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		log.Debug("Foo no longer exists; its Deployment goes with it")
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if foo.DeletionTimestamp != nil {
		// Its Deployment is being (or has been) garbage-collected: one
		// made now would only be collected again, and would hold up a
		// foreground deletion of the Foo.
		log.Debug("Foo is being deleted; leaving its Deployment to the garbage collector")
		return controller.Result{}, nil
	}
	name := foo.Spec.DeploymentName
	if w, ok := r.written.Load(key); ok && name == "" && w.(written).rv == foo.ResourceVersion {
		return controller.Result{}, nil // woken by its own report of the missing name
	}
	if name == "" {
		err := fmt.Errorf("Foo %s: %w", key, ErrNoDeploymentName)
		return controller.Result{}, r.fail(ctx, foo, ReasonDeploymentNameMissing, ReasonDeploymentNameMissing, ErrNoDeploymentName, controller.TerminalError(err))
	}

	changed := false // a Deployment created, repaired or deleted, or the status written
	dep, err := r.Deployments.Get(ctx, foo.Namespace, name)
	if apierrors.IsNotFound(err) {
		dep, err = r.Deployments.Create(ctx, NewDeployment(foo))
		changed = err == nil
		if changed {
			log.Info("Created Deployment", "deployment", name, "replicas", ptr.Deref(dep.Spec.Replicas, 0))
		}
	}
	if err != nil {
		return controller.Result{}, err
	}
	if !metav1.IsControlledBy(dep, foo) {
		err := &ResourceExistsError{Name: dep.Name}
		return controller.Result{}, r.fail(ctx, foo, ErrResourceExists, ReasonDeploymentNotOwned, err, err)
	}
	if want := NewDeployment(foo); drifted(dep, want) {
		// Server-side apply restores what the controller owns and leaves
		// what others added; the resourceVersion makes sure it applies to
		// the Deployment found to be this Foo's.
		log.Info("Repairing Deployment", "deployment", name)
		want.ResourceVersion = dep.ResourceVersion
		if dep, err = r.Deployments.Apply(ctx, want, client.PatchOptions{Force: true}); err != nil {
			return controller.Result{}, err
		}
		changed = true
	}
	deleted, err := r.deleteRenamed(ctx, foo, dep)
	if err != nil {
		return controller.Result{}, err
	}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: ReasonDeploymentProgressing,
		Message: fmt.Sprintf("%d of %d replicas available", dep.Status.AvailableReplicas, ptr.Deref(dep.Spec.Replicas, 1))}
	if available(dep) {
		ready.Status, ready.Reason = metav1.ConditionTrue, ReasonDeploymentAvailable
	}
	wrote, err := r.updateStatus(ctx, foo, dep.Status.AvailableReplicas, ready)
	if err != nil {
		return controller.Result{}, err
	}
	// Synced only after a change: a sync that finds everything in place
	// writes nothing at all, not even an Event patch (sample-controller
	// records it on every sync).
	changed = changed || deleted || wrote
	log.Debug("Foo synced", "rv", foo.ResourceVersion, "changed", changed)
	if changed {
		r.Recorder.Event(foo, corev1.EventTypeNormal, SuccessSynced, MessageResourceSynced)
	}
	return controller.Result{}, nil
}

// fail makes a problem visible: a Warning event and Ready=False with the
// reason, in the status. It returns err.
func (r *Reconciler) fail(ctx context.Context, foo *v1alpha1.Foo, event, reason string, problem, err error) error {
	r.Recorder.Event(foo, corev1.EventTypeWarning, event, problem.Error())
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: reason, Message: problem.Error()}
	_, serr := r.updateStatus(ctx, foo, foo.Status.AvailableReplicas, ready)
	return errors.Join(err, serr)
}

// drifted reports whether dep lacks what want sets: replicas, the
// selector and template labels, the nginx container's image.
func drifted(dep, want *appsv1.Deployment) bool {
	if want.Spec.Replicas != nil && ptr.Deref(dep.Spec.Replicas, 1) != *want.Spec.Replicas {
		return true
	}
	for k, v := range want.Spec.Template.Labels {
		if dep.Spec.Template.Labels[k] != v || dep.Spec.Selector == nil || dep.Spec.Selector.MatchLabels[k] != v {
			return true
		}
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == want.Spec.Template.Spec.Containers[0].Name {
			return c.Image != want.Spec.Template.Spec.Containers[0].Image
		}
	}
	return true
}

// available reports whether all of dep's replicas are available in its
// latest rollout.
func available(dep *appsv1.Deployment) bool {
	return dep.Status.ObservedGeneration >= dep.Generation && dep.Status.AvailableReplicas >= ptr.Deref(dep.Spec.Replicas, 1) &&
		dep.Status.UpdatedReplicas >= ptr.Deref(dep.Spec.Replicas, 1)
}

// deleteRenamed deletes the Deployments this Foo controls under another
// name than spec.deploymentName (it was renamed), once dep, the current
// one, is available. It reports whether it deleted one.
func (r *Reconciler) deleteRenamed(ctx context.Context, foo *v1alpha1.Foo, dep *appsv1.Deployment) (bool, error) {
	all, err := r.Deployments.List(ctx, foo.Namespace, nil)
	if err != nil {
		return false, err
	}
	deleted := false
	for _, old := range all {
		if old.Name != dep.Name && metav1.IsControlledBy(old, foo) && available(dep) {
			r.Logger.Info("Deleting the Deployment of the Foo's old name", "foo", foo.Name, "deployment", old.Name)
			if err := r.Deployments.Delete(ctx, old.Namespace, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return deleted, err
			}
			deleted = true
		}
	}
	return deleted, nil
}

// updateStatus writes the Foo's status (available replicas, observed
// generation, the Ready condition) unless it is already there. Written
// once at least for every Foo. A CRD whose schema prunes the fields
// (sample-controller's) keeps only availableReplicas: the last write is
// remembered so that a pruned status is not written again and again.
// It reports whether it wrote.
func (r *Reconciler) updateStatus(ctx context.Context, foo *v1alpha1.Foo, availableReplicas int32, ready metav1.Condition) (bool, error) {
	want := *foo.Status.DeepCopy()
	want.AvailableReplicas, want.ObservedGeneration = availableReplicas, foo.Generation
	meta.SetStatusCondition(&want.Conditions, ready)
	key := cache.KeyOf(foo)
	if w, ok := r.written.Load(key); ok && w.(written).rv == foo.ResourceVersion && equality.Semantic.DeepEqual(w.(written).status, want) {
		return false, nil
	}
	if equality.Semantic.DeepEqual(foo.Status, want) {
		return false, nil
	}
	changed := cache.Copy(foo)
	changed.Status = want
	got, err := r.Foos.WriteStatus(ctx, changed)
	if err != nil {
		return false, fmt.Errorf("update status of Foo %s/%s: %w", foo.Namespace, foo.Name, err)
	}
	r.written.Store(key, written{rv: got.ResourceVersion, status: want})
	return true, nil
}

// written is the last status this controller wrote for a Foo, and the
// resourceVersion the write returned.
type written struct {
	rv     string
	status v1alpha1.FooStatus
}

// NewDeployment returns the Deployment a Foo asks for: named
// spec.deploymentName in the Foo's namespace, controlled by the Foo, with
// spec.replicas replicas (nil: the API server's default, 1) of one nginx
// container, and pods labelled app=nginx, controller=<Foo's name>, the
// labels its selector matches.
func NewDeployment(foo *v1alpha1.Foo) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo.Name}
	var replicas *int32
	if foo.Spec.Replicas != nil {
		replicas = ptr.To(*foo.Spec.Replicas)
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            foo.Spec.DeploymentName,
			Namespace:       foo.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, v1alpha1.Kind)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: NginxImage}},
				},
			},
		},
	}
}
