package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/fleet"
)

// childTimeout bounds how long a child waits for its clusters.
const childTimeout = 5 * time.Minute

// runChild is one side in a process of its own. A measuring child
// ("kloop", "peer") joins the Secrets' clusters c1..cN, waits until each
// has reconciled its ConfigMaps and all is quiet, and prints "MEASURED
// heapInuse heapAlloc goroutines rss"; a joining child ("kloop-join",
// "peer-join") starts with no cluster and creates the Secrets of c1..cN
// one at a time, printing "JOINED <duration>" for each from just before
// the create to the first reconcile in that cluster. "baseline" measures a
// process that does nothing. Every child exits when its stdin closes.
func runChild(mode, home, dir string, clusters, objects int, profile string) error {
	exitOnEOF()
	if mode == "baseline" {
		s := measure()
		fmt.Printf("MEASURED %d %d %d %d\n", s.inuse, s.alloc, s.goroutines, s.rss)
		select {}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", home)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), childTimeout, errors.New("the clusters did not all reconcile in time"))
	defer cancel()
	tr := newTracker()
	switch mode {
	case "kloop", "kloop-join":
		err = startKloop(context.Background(), cfg, tr)
	case "peer", "peer-join":
		err = startPeer(context.Background(), cfg, tr)
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		return err
	}
	names := make([]string, clusters)
	for i := range names {
		names[i] = memberName(i + 1)
	}
	switch mode {
	case "kloop", "peer":
		if err := tr.waitAll(ctx, names, objects); err != nil {
			return err
		}
		tr.settle(time.Second)
		if profile != "" {
			if err := writeProfiles(profile); err != nil {
				return err
			}
		}
		s := measure()
		fmt.Printf("MEASURED %d %d %d %d\n", s.inuse, s.alloc, s.goroutines, s.rss)
	default:
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		for _, name := range names {
			s, err := kubeconfigSecret(dir, name)
			if err != nil {
				return err
			}
			first := tr.firstIn(name)
			start := time.Now()
			if _, err := kc.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return err
			}
			select {
			case <-first:
			case <-ctx.Done():
				return fmt.Errorf("cluster %s: no reconcile: %w", name, context.Cause(ctx))
			}
			fmt.Printf("JOINED %v\n", time.Since(start))
		}
	}
	select {}
}

// tracker records the reconciles of each cluster.
type tracker struct {
	mu      sync.Mutex
	seen    map[string]map[string]bool
	first   map[string]chan struct{}
	last    time.Time
	changed chan struct{}
}

func newTracker() *tracker {
	return &tracker{seen: map[string]map[string]bool{}, first: map[string]chan struct{}{}, changed: make(chan struct{}, 1)}
}

func (t *tracker) firstLocked(cluster string) chan struct{} {
	ch, ok := t.first[cluster]
	if !ok {
		ch = make(chan struct{})
		t.first[cluster] = ch
	}
	return ch
}

// firstIn is closed at the cluster's first reconcile.
func (t *tracker) firstIn(cluster string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.firstLocked(cluster)
}

func (t *tracker) reconciled(cluster, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = time.Now()
	if t.seen[cluster] == nil {
		t.seen[cluster] = map[string]bool{}
		close(t.firstLocked(cluster))
	}
	t.seen[cluster][key] = true
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// waitAll waits until each cluster has reconciled objects distinct keys.
func (t *tracker) waitAll(ctx context.Context, clusters []string, objects int) error {
	for {
		t.mu.Lock()
		var short []string
		for _, c := range clusters {
			if len(t.seen[c]) < objects {
				short = append(short, fmt.Sprintf("%s (%d of %d)", c, len(t.seen[c]), objects))
			}
		}
		t.mu.Unlock()
		if len(short) == 0 {
			return nil
		}
		select {
		case <-t.changed:
		case <-ctx.Done():
			return fmt.Errorf("clusters not reconciled: %v: %w", short, context.Cause(ctx))
		}
	}
}

// settle returns once nothing has been reconciled for quiet.
func (t *tracker) settle(quiet time.Duration) {
	for {
		t.mu.Lock()
		since := time.Since(t.last)
		t.mu.Unlock()
		if since >= quiet {
			return
		}
		time.Sleep(quiet - since)
	}
}

// startKloop runs one kloop App over the fleet of the Secrets: one fleet
// controller For the ConfigMaps of the namespace, in every cluster.
func startKloop(ctx context.Context, cfg *rest.Config, tr *tracker) error {
	app, err := kloop.New(cfg, kloop.Options{
		Name:      "fleet-bench",
		Namespace: namespace,
		Logger:    slog.New(slog.DiscardHandler),
		Registry:  prometheus.NewRegistry(),
	})
	if err != nil {
		return err
	}
	f, err := fleet.New(app, fleet.Options{SecretSelector: label + "=true", SecretNamespace: namespace})
	if err != nil {
		return err
	}
	cms := fleet.Objects[*corev1.ConfigMap](f)
	if _, err := fleet.NewController(f, "configmaps", func(ctx context.Context, k fleet.Key) (controller.Result, error) {
		if _, err := cms.In(k.Cluster).Get(ctx, k.Namespace, k.Name); err == nil {
			tr.reconciled(k.Cluster, k.Key.String())
		}
		return controller.Result{}, nil
	}).For(cms).Complete(); err != nil {
		return err
	}
	go func() {
		if err := app.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "ERROR kloop App:", err)
		}
	}()
	return nil
}

// startPeer runs controller-runtime the way a fleet is run with it today:
// a manager on the home cluster watches the kubeconfig Secrets, and each
// Secret gets a manager of its own on its cluster, with a controller For
// the ConfigMaps of the namespace; a deleted Secret stops its manager.
func startPeer(ctx context.Context, cfg *rest.Config, tr *tracker) error {
	crlog.SetLogger(logr.Discard())
	sel, err := labels.Parse(label + "=true")
	if err != nil {
		return err
	}
	opts := func(byObject map[crclient.Object]crcache.ByObject) manager.Options {
		return manager.Options{
			Scheme:                 clientgoscheme.Scheme,
			Logger:                 logr.Discard(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  crcache.Options{DefaultNamespaces: map[string]crcache.Config{namespace: {}}, ByObject: byObject},
		}
	}
	home, err := manager.New(cfg, opts(map[crclient.Object]crcache.ByObject{&corev1.Secret{}: {Label: sel}}))
	if err != nil {
		return err
	}
	p := &peerFleet{ctx: ctx, home: home.GetClient(), opts: opts(nil), tr: tr, running: map[string]context.CancelFunc{}}
	if err := ctrl.NewControllerManagedBy(home).Named("kubeconfig-secrets").For(&corev1.Secret{}).Complete(p); err != nil {
		return err
	}
	go func() {
		if err := home.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "ERROR peer home manager:", err)
		}
	}()
	return nil
}

// peerFleet is the peer's reconciler of kubeconfig Secrets.
type peerFleet struct {
	ctx     context.Context
	home    crclient.Client
	opts    manager.Options
	tr      *tracker
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

func (p *peerFleet) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var s corev1.Secret
	err := p.home.Get(ctx, req.NamespacedName, &s)
	p.mu.Lock()
	defer p.mu.Unlock()
	if apierrors.IsNotFound(err) {
		if stop, ok := p.running[req.Name]; ok {
			stop()
			delete(p.running, req.Name)
		}
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if _, ok := p.running[req.Name]; ok {
		return reconcile.Result{}, nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["kubeconfig"])
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("Secret %s: %w", req.Name, err)
	}
	m, err := manager.New(cfg, p.opts)
	if err != nil {
		return reconcile.Result{}, err
	}
	cluster, c := req.Name, m.GetClient()
	if err := ctrl.NewControllerManagedBy(m).Named("configmaps-" + cluster).For(&corev1.ConfigMap{}).Complete(
		reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, r.NamespacedName, &cm); err == nil {
				p.tr.reconciled(cluster, r.String())
			}
			return reconcile.Result{}, nil
		})); err != nil {
		return reconcile.Result{}, err
	}
	mctx, stop := context.WithCancel(p.ctx)
	p.running[cluster] = stop
	go func() {
		if err := m.Start(mctx); err != nil && mctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "ERROR peer manager of", cluster+":", err)
		}
	}()
	return reconcile.Result{}, nil
}
