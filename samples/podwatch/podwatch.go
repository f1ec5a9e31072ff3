package podwatch

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// Defaults of Options.
const (
	DefaultNamespace  = "default"
	DefaultMaxRetries = 5
)

// Options configures Run. The zero value watches the "default" namespace
// with one worker, writes to stdout and logs to slog.Default.
type Options struct {
	// Namespace is the one namespace watched. Default "default".
	Namespace string
	// Workers is how many pods are synced at once. Default 1.
	Workers int
	// MaxRetries is how many times a failing sync is retried before the
	// pod is dropped from the queue. Default 5 (6 attempts in all).
	MaxRetries int
	// Out receives the sync lines. Default os.Stdout.
	Out io.Writer
	// Logger receives logs. Default slog.Default().
	Logger *slog.Logger
	// HTTPAddr, if set, serves /metrics, /healthz and /readyz there.
	HTTPAddr string
	// HealthAddr, if set, serves /healthz and /readyz there instead.
	HealthAddr string
	// SecureMetrics, if set, serves /metrics over TLS to callers the API
	// server authenticates and authorizes (package metrics/secure).
	SecureMetrics *secure.Options
	// Registerer and Gatherer hold the metrics. Default: the kloop
	// registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer

	// failSync, set by this package's tests only, is called before a pod
	// is printed; its error fails the sync.
	failSync func(*corev1.Pod) error
}

// podwatch only lists and watches the pods of its one namespace: a Role
// there ("system" is a placeholder that kustomize replaces with the
// namespace of deploy/podwatch, whose pods it watches).
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch,namespace=system

// Run watches the pods of one namespace until ctx is done, printing
// "Sync/Add/Update for Pod <name>" for every pod it syncs and
// "Pod <namespace>/<name> does not exist anymore" for every pod gone. It
// returns nil once stopped through ctx, after the sync in flight finished.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger

	factory := informer.NewFactory(cfg, informer.FactoryOptions{Logger: log, Registerer: opts.Registerer})
	pods, err := informer.Of[*corev1.Pod](factory, informer.Scope{Namespace: opts.Namespace})
	if err != nil {
		return err
	}
	s := &syncer{pods: pods.Lister(), out: opts.Out, failSync: opts.failSync}
	c, err := controller.New[cache.Key](s, controller.Options[cache.Key]{
		Name:       "podwatch",
		Workers:    opts.Workers,
		MaxRetries: opts.MaxRetries,
		Dropped: func(ctx context.Context, key cache.Key, err error) {
			log.Error("Dropping pod out of the queue", "pod", key.String(), "err", err)
		},
		Logger:     log,
		Registerer: opts.Registerer,
	})
	if err != nil {
		return err
	}
	if err := c.Watch(controller.For(pods)); err != nil {
		return err
	}
	mopts := manager.Options{
		MetricsAddr: opts.HTTPAddr,
		HealthAddr:  cmp.Or(opts.HealthAddr, opts.HTTPAddr),
		Gatherer:    opts.Gatherer,
		Logger:      log,
	}
	if opts.SecureMetrics != nil && opts.HTTPAddr != "" {
		so := *opts.SecureMetrics
		so.Logger = cmp.Or(so.Logger, log)
		sm, err := secure.New(cfg, so)
		if err != nil {
			return err
		}
		mopts.WrapMetrics, mopts.MetricsTLS = sm.Wrap, sm.TLSConfig()
	}
	m, err := manager.New(mopts)
	if err != nil {
		return err
	}
	if err := m.Add(factory); err != nil {
		return err
	}
	if err := m.Add(c); err != nil {
		return err
	}
	log.Info("Starting Pod controller", "namespace", opts.Namespace)
	defer log.Info("Stopping Pod controller")
	return m.Start(ctx)
}

// syncer is the business logic: it prints what it finds and only returns
// errors; the controller owns retries.
type syncer struct {
	pods     cache.Lister[*corev1.Pod]
	out      io.Writer
	failSync func(*corev1.Pod) error
}

func (s *syncer) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	pod, ok := s.pods.Get(key.Namespace, key.Name)
	if !ok {
		// Reading the cache, not the event: the pod may have been
		// recreated under the same name since; compare UIDs to tell.
		fmt.Fprintf(s.out, "Pod %s does not exist anymore\n", key)
		return controller.Result{}, nil
	}
	if s.failSync != nil {
		if err := s.failSync(pod); err != nil {
			return controller.Result{}, fmt.Errorf("syncing pod %s: %w", key, err)
		}
	}
	fmt.Fprintf(s.out, "Sync/Add/Update for Pod %s\n", pod.Name)
	return controller.Result{}, nil
}
