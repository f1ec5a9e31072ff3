package foo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
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
	// successful sync, with MessageResourceSynced.
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
// informers list and watch Foos and Deployments, it creates Deployments and
// updates their replicas, writes Foos' status through the status
// subresource, and records Events (created, then patched for repeats).
// Reads go to the informers' caches, never to the API server, so no get.
// A Foo CRD without a status subresource (sample-controller's plain
// crd.yaml) also needs update on foos; deploy/ installs the CRD with one.
//
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos,verbs=list;watch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;update
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
}

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
	if name == "" {
		return controller.Result{}, controller.TerminalError(fmt.Errorf("Foo %s: %w", key, ErrNoDeploymentName))
	}

	dep, err := r.Deployments.Get(ctx, foo.Namespace, name)
	if apierrors.IsNotFound(err) {
		dep, err = r.Deployments.Create(ctx, NewDeployment(foo))
		if err == nil {
			log.Info("Created Deployment", "deployment", name, "replicas", ptr.Deref(dep.Spec.Replicas, 0))
		}
	}
	if err != nil {
		return controller.Result{}, err
	}

	if !metav1.IsControlledBy(dep, foo) {
		err := &ResourceExistsError{Name: dep.Name}
		r.Recorder.Event(foo, corev1.EventTypeWarning, ErrResourceExists, err.Error())
		return controller.Result{}, err
	}

	if want := foo.Spec.Replicas; want != nil && (dep.Spec.Replicas == nil || *dep.Spec.Replicas != *want) {
		log.Info("Updating Deployment replicas", "deployment", name, "from", ptr.Deref(dep.Spec.Replicas, 0), "to", *want)
		changed := cache.Copy(dep)
		changed.Spec.Replicas = ptr.To(*want)
		if dep, err = r.Deployments.Update(ctx, changed); err != nil {
			return controller.Result{}, err
		}
	}

	if err := r.updateStatus(ctx, foo, dep); err != nil {
		return controller.Result{}, err
	}
	r.Recorder.Event(foo, corev1.EventTypeNormal, SuccessSynced, MessageResourceSynced)
	return controller.Result{}, nil
}

// updateStatus copies the Deployment's available replicas into the Foo's
// status, unless they are already there.
func (r *Reconciler) updateStatus(ctx context.Context, foo *v1alpha1.Foo, dep *appsv1.Deployment) error {
	if foo.Status.AvailableReplicas == dep.Status.AvailableReplicas {
		return nil
	}
	changed := cache.Copy(foo)
	changed.Status.AvailableReplicas = dep.Status.AvailableReplicas
	if _, err := r.Foos.WriteStatus(ctx, changed); err != nil {
		return fmt.Errorf("update status of Foo %s/%s: %w", foo.Namespace, foo.Name, err)
	}
	return nil
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
