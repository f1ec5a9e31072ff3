package foo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/record"
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

// Options configures Run. The zero value watches every namespace with two
// workers, logs to slog.Default and keeps metrics on the kloop registry,
// with no HTTP server.
type Options struct {
	// Namespace limits the controller to the Foos and Deployments of one
	// namespace; "" means all namespaces.
	Namespace string
	// Workers is how many Foos are synced at once. Default DefaultWorkers.
	Workers int
	// HTTPAddr, if set, serves /metrics, /healthz and /readyz there.
	HTTPAddr string
	// Logger receives logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer and Gatherer hold the metrics. Default: the kloop
	// registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// Run runs the Foo controller against the API server at cfg until ctx is
// done, then stops after the syncs in flight and returns nil. The Foo CRD
// must be installed (CRDYAML, or sample-controller's crd.yaml or
// crd-status-subresource.yaml); until it is, Run fails after the
// controller's sync timeout, naming the Foo informer and the API server's
// answer.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	m, err := NewManager(cfg, opts)
	if err != nil {
		return err
	}
	log := opts.logger()
	log.Info("Starting Foo controller", "namespace", opts.Namespace)
	defer log.Info("Stopped Foo controller")
	return m.Start(ctx)
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// NewManager returns a manager that runs the Foo controller, its informers
// and its event recorder; Start runs them. It does no I/O.
func NewManager(cfg *rest.Config, opts Options) (*manager.Manager, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	log := opts.logger()
	scheme := Scheme()

	factory := informer.NewFactory(cfg, informer.FactoryOptions{Scheme: scheme, Logger: log, Registerer: opts.Registerer})
	scope := informer.Scope{Namespace: opts.Namespace}
	foos, err := informer.OfResource[*v1alpha1.Foo](factory, v1alpha1.Resource, scope)
	if err != nil {
		return nil, err
	}
	deployments, err := informer.Of[*appsv1.Deployment](factory, scope)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, FieldManager: ControllerName, Logger: log})
	if err != nil {
		return nil, err
	}
	fooRes, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		return nil, err
	}
	depRes, err := client.NewResource[*appsv1.Deployment](c, appsv1.SchemeGroupVersion.WithResource("deployments"))
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rec, err := record.New(cfg, record.Options{Component: ControllerName, Scheme: scheme, Logger: log, Registerer: opts.Registerer})
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Foos:              fooRes,
		Deployments:       depRes,
		FooCache:          fooRes.Cached(foos.Lister(), client.ReaderOptions{Logger: log}),
		DeploymentCache:   depRes.Cached(deployments.Lister(), client.ReaderOptions{Logger: log}),
		Recorder:          rec,
		StatusSubresource: DiscoverStatusSubresource(disc),
		Logger:            log.With("controller", ControllerName),
	}
	ctrl, err := controller.New[cache.Key](r, controller.Options[cache.Key]{
		Name:    ControllerName,
		Workers: opts.Workers,
		// sample-controller's limiter: per-key back-off from 5 ms to
		// 1000 s, and 50 retries a second overall (burst 300).
		RateLimiter: workqueue.NewMaxOfRateLimiter[cache.Key](
			workqueue.NewExponentialRateLimiter[cache.Key](5*time.Millisecond, 1000*time.Second),
			workqueue.NewBucketRateLimiter[cache.Key](50, 300, clock.RealClock{}),
		),
		Logger:     log,
		Registerer: opts.Registerer,
	})
	if err != nil {
		return nil, err
	}
	if err := ctrl.Watch(controller.For(foos)); err != nil {
		return nil, err
	}
	if err := ctrl.Watch(controller.Owns(deployments, v1alpha1.Kind.GroupKind())); err != nil {
		return nil, err
	}
	m, err := manager.New(manager.Options{
		MetricsAddr: opts.HTTPAddr,
		HealthAddr:  opts.HTTPAddr,
		Gatherer:    opts.Gatherer,
		Logger:      log,
	})
	if err != nil {
		return nil, err
	}
	for _, run := range []manager.Runnable{factory, rec, ctrl} {
		if err := m.Add(run); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Recorder records events; *record.Recorder is one.
type Recorder interface {
	Event(obj watcher.Object, eventType, reason, message string)
}

// Reconciler syncs one Foo (see the package documentation). Its fields are
// its dependencies; NewManager fills them in.
type Reconciler struct {
	Foos        *client.Resource[*v1alpha1.Foo]
	Deployments *client.Resource[*appsv1.Deployment]
	// FooCache and DeploymentCache read the informers' caches after
	// waiting for this client's own writes.
	FooCache        *client.CachedReader[*v1alpha1.Foo]
	DeploymentCache *client.CachedReader[*appsv1.Deployment]
	Recorder        Recorder
	// StatusSubresource says whether Foos have a status subresource.
	StatusSubresource *StatusSubresource
	Logger            *slog.Logger
}

// Reconcile syncs the Foo at key.
func (r *Reconciler) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	log := r.Logger.With("key", key.String())
	foo, err := r.FooCache.Get(ctx, key.Namespace, key.Name)
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

	dep, err := r.DeploymentCache.Get(ctx, foo.Namespace, name)
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
	sub, err := r.StatusSubresource.Has(ctx)
	if err != nil {
		return err
	}
	changed := cache.Copy(foo)
	changed.Status.AvailableReplicas = dep.Status.AvailableReplicas
	if sub {
		_, err = r.Foos.UpdateStatus(ctx, changed)
		if apierrors.IsNotFound(err) {
			// The CRD may have lost its status subresource; ask again next
			// time.
			r.StatusSubresource.Forget()
		}
	} else {
		var got *v1alpha1.Foo
		got, err = r.Foos.Update(ctx, changed)
		if err == nil && got.Status.AvailableReplicas != changed.Status.AvailableReplicas {
			// The CRD has gained a status subresource, so the API server
			// kept the old status; ask again and write it there.
			r.StatusSubresource.Forget()
			err = errStatusIgnored
		}
	}
	if err != nil {
		return fmt.Errorf("update status of Foo %s/%s: %w", foo.Namespace, foo.Name, err)
	}
	return nil
}

// errStatusIgnored is the error of an update of a whole Foo that did not
// change its status.
var errStatusIgnored = errors.New("the API server kept the old status: Foos have a status subresource now")

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

// StatusSubresource finds out, through API discovery, whether Foos are
// served with a status subresource, and remembers the answer until Forget.
// It is safe for concurrent use; concurrent callers share one request.
type StatusSubresource struct {
	disc discovery.ServerResourcesInterfaceWithContext

	mu    sync.Mutex
	known bool
	has   bool
}

// DiscoverStatusSubresource returns a StatusSubresource asking disc (a
// discovery client).
func DiscoverStatusSubresource(disc discovery.ServerResourcesInterfaceWithContext) *StatusSubresource {
	return &StatusSubresource{disc: disc}
}

// Has reports whether foos/status is served.
func (s *StatusSubresource) Has(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		return s.has, nil
	}
	list, err := s.disc.ServerResourcesForGroupVersionWithContext(ctx, v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	s.has = false
	for _, r := range list.APIResources {
		if r.Name == v1alpha1.Resource.Resource+"/status" {
			s.has = true
		}
	}
	s.known = true
	return s.has, nil
}

// Forget drops the remembered answer.
func (s *StatusSubresource) Forget() {
	s.mu.Lock()
	s.known = false
	s.mu.Unlock()
}
