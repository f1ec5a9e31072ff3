package scaleout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/watcher"
)

// The replica program's settings, from the environment the test gives it.
const (
	replicaEnv    = "SCALEOUT_REPLICA"    // this replica's identity
	kubeconfigEnv = "SCALEOUT_KUBECONFIG" // the control plane
	groupEnv      = "SCALEOUT_GROUP"      // the shard group, also the Leases' namespace
	recordsEnv    = "SCALEOUT_RECORDS"    // file the reconciles are appended to
	clientSideEnv = "SCALEOUT_CLIENT_SIDE"
)

// The Lease timings of the replicas: short, for quick takeovers.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = time.Second
	slots         = 64
)

// cacheDump is what a replica's /cache answers, once it is settled.
type cacheDump struct {
	Identity    string
	Foos        []string          // keys of the cached Foos
	Deployments map[string]string // cached Deployment key → its controlling Foo's name
	Filtering   map[string]string // informer → "server" or "client"
	Table       string            // the shard table
	// Clusters is a fleet replica's caches, by cluster (Foos and
	// Deployments above are then empty).
	Clusters map[string]clusterDump
}

// replicaMain runs one Foo-controller replica until SIGTERM. It prints
// its HTTP address on stdout once it serves, and appends one line per
// reconcile start and end to the records file.
func replicaMain() int {
	id := os.Getenv(replicaEnv)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("replica", id)
	fail := func(err error) int {
		log.Error("replica failed", "err", err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(kubeconfigEnv))
	if err != nil {
		return fail(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	records, err := os.OpenFile(os.Getenv(recordsEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	defer records.Close()
	group := os.Getenv(groupEnv)
	app, err := kloop.New(cfg, kloop.Options{
		Name:     foo.ControllerName,
		Scheme:   foo.Scheme(),
		Logger:   log,
		Registry: prometheus.NewRegistry(),
		Sharding: &kloop.Sharding{
			Group:          group,
			Namespace:      group,
			Identity:       id,
			Slots:          slots,
			LeaseDuration:  leaseDuration,
			RenewDeadline:  renewDeadline,
			RetryPeriod:    retryPeriod,
			ClientSideOnly: os.Getenv(clientSideEnv) != "",
		},
	})
	if err != nil {
		return fail(err)
	}
	r := &foo.Reconciler{
		Foos:        kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource}),
		Deployments: kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")}),
		Recorder:    noEvents{},
		Logger:      log,
	}
	var mu sync.Mutex
	record := func(what string, key cache.Key) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(records, "%s %s %s %d\n", what, id, key, time.Now().UnixNano())
	}
	reconcile := func(ctx context.Context, key cache.Key) (controller.Result, error) {
		record("S", key)
		defer record("E", key)
		return r.Reconcile(ctx, key)
	}
	if _, err := kloop.NewController(app, foo.ControllerName, reconcile).
		For(r.Foos).Owns(r.Deployments).Workers(4).WithOptions(func(o *controller.Options[cache.Key]) { o.RateLimiter = foo.RateLimiter() }).Complete(); err != nil {
		return fail(err)
	}

	// cacheChanged is poked whenever a cache or the member changes.
	cacheChanged := &await.Signal{}
	for _, add := range []func() error{
		func() error {
			_, err := r.Foos.Informer().AddHandler(changes[*v1alpha1.Foo](cacheChanged), informer.HandlerOptions{Name: "test"})
			return err
		},
		func() error {
			_, err := r.Deployments.Informer().AddHandler(changes[*appsv1.Deployment](cacheChanged), informer.HandlerOptions{Name: "test"})
			return err
		},
	} {
		if err := add(); err != nil {
			return fail(err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/", app.Manager().Handler())
	// /cache waits until the member is settled and every cached Foo's
	// Deployment is cached too (replicas see their own writes with some
	// delay), then describes the caches.
	mux.HandleFunc("/cache", func(w http.ResponseWriter, req *http.Request) {
		m := app.Member()
		for {
			ch, mch := cacheChanged.Changed(), m.StatusChanged()
			if m.Status().Settled && complete(r) {
				break
			}
			select {
			case <-ch:
			case <-mch:
			case <-req.Context().Done():
				http.Error(w, fmt.Sprintf("not settled (or a Foo's Deployment is not cached): %d Foos, %d Deployments\n%s",
					len(r.Foos.Informer().Lister().List(nil)), len(r.Deployments.Informer().Lister().List(nil)), m.Status()), http.StatusServiceUnavailable)
				return
			}
		}
		st := m.Status()
		d := cacheDump{Identity: id, Deployments: map[string]string{}, Filtering: map[string]string{}, Table: st.String()}
		for _, f := range r.Foos.Informer().Lister().List(nil) {
			d.Foos = append(d.Foos, cache.KeyOf(f).String())
		}
		for _, dep := range r.Deployments.Informer().Lister().List(nil) {
			owner := ""
			if ref := metav1.GetControllerOf(dep); ref != nil {
				owner = ref.Name
			}
			d.Deployments[cache.KeyOf(dep).String()] = owner
		}
		for _, inf := range st.Informers {
			d.Filtering[inf.Name] = inf.Filtering
		}
		_ = json.NewEncoder(w).Encode(d)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = app.Run(ctx)
	_ = srv.Close()
	if err != nil {
		return fail(err)
	}
	return 0
}

// complete reports whether every cached Foo's Deployment is cached.
func complete(r *foo.Reconciler) bool {
	deps := r.Deployments.Informer().Lister()
	for _, f := range r.Foos.Informer().Lister().List(nil) {
		if _, ok := deps.Get(f.Namespace, f.Spec.DeploymentName); !ok {
			return false
		}
	}
	return true
}

func changes[T watcher.Object](n *await.Signal) informer.Handler[T] {
	return informer.HandlerFuncs[T]{
		AddFunc:    func(T, bool) { n.Notify() },
		UpdateFunc: func(_, _ T) { n.Notify() },
		DeleteFunc: func(T, bool) { n.Notify() },
	}
}

// noEvents drops the Foo controller's events: they are not what these
// tests look at, and 600 Foos' worth of them only load the machine.
type noEvents struct{}

func (noEvents) Event(watcher.Object, string, string, string) {}
