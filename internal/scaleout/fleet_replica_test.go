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
	"strconv"
	"strings"
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
	"github.com/kloop-dev/kloop/fleet"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// The fleet replica's settings, besides the scale-out replica's.
const (
	fleetDirEnv      = "SCALEOUT_FLEET_DIR"      // kubeconfig directory of the fleet's clusters
	fleetClustersEnv = "SCALEOUT_FLEET_CLUSTERS" // their names, comma-separated
)

// clusterDump is what a fleet replica caches of one cluster.
type clusterDump struct {
	Foos        []string          // keys of the cached Foos
	Deployments map[string]string // cached Deployment key → its controlling Foo's name
}

// fleetReplicaMain runs one replica of a Foo controller over a fleet
// (kloop.Options.Fleet) with Sharding until SIGTERM: its Leases in the
// home cluster (the kubeconfig of kubeconfigEnv), its clusters from a
// kubeconfig directory. Like replicaMain it prints its address, records
// each reconcile's start and end (keys are cluster/namespace/name), and
// serves /cache once settled.
func fleetReplicaMain() int {
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
			Group:         group,
			Namespace:     group,
			Identity:      id,
			Slots:         slots,
			LeaseDuration: leaseDuration,
			RenewDeadline: renewDeadline,
			RetryPeriod:   retryPeriod,
		},
	})
	if err != nil {
		return fail(err)
	}
	fl, err := fleet.New(app, fleet.Options{KubeconfigDir: os.Getenv(fleetDirEnv)})
	if err != nil {
		return fail(err)
	}
	foos := fleet.Objects[*v1alpha1.Foo](fl, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	deps := fleet.Objects[*appsv1.Deployment](fl, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")})
	var mu sync.Mutex
	record := func(what string, key fleet.Key) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(records, "%s %s %s %d\n", what, id, key, time.Now().UnixNano())
	}
	if _, err := fleet.NewController(fl, foo.ControllerName, func(ctx context.Context, k fleet.Key) (controller.Result, error) {
		record("S", k)
		defer record("E", k)
		r := foo.Reconciler{Foos: foos.In(k.Cluster), Deployments: deps.In(k.Cluster), Recorder: noEvents{}, Logger: log.With("cluster", k.Cluster)}
		return r.Reconcile(ctx, k.Key)
	}).For(foos).Owns(deps).Workers(4).Complete(); err != nil {
		return fail(err)
	}

	clusters := strings.Split(os.Getenv(fleetClustersEnv), ",")
	// ready reports whether every cluster is joined and each cached Foo's
	// Deployment is cached too.
	ready := func() bool {
		for _, c := range clusters {
			if fl.Cluster(c) == nil {
				return false
			}
			deps := deps.In(c).Informer().Lister()
			for _, f := range foos.In(c).Informer().Lister().List(nil) {
				if _, ok := deps.Get(f.Namespace, f.Spec.DeploymentName); !ok {
					return false
				}
			}
		}
		return true
	}
	mux := http.NewServeMux()
	mux.Handle("/", app.Manager().Handler())
	// /cache waits until the member is settled and ready holds (the
	// member's status changes at least at every renewal), and with
	// ?active=N until it reconciles N slots (a Lease lists slots taken
	// over before their caches have filled), then describes the caches of
	// each cluster.
	mux.HandleFunc("/cache", func(w http.ResponseWriter, req *http.Request) {
		m := app.Member()
		active := 0
		if v := req.URL.Query().Get("active"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				http.Error(w, "active: "+err.Error(), http.StatusBadRequest)
				return
			}
			active = n
		}
		for {
			ch := m.StatusChanged()
			if st := m.Status(); st.Settled && len(st.Active) >= active && ready() {
				break
			}
			select {
			case <-ch:
			case <-req.Context().Done():
				http.Error(w, fmt.Sprintf("not settled, or a cluster not joined, or a Foo's Deployment not cached\n%s", m.Status()), http.StatusServiceUnavailable)
				return
			}
		}
		st := m.Status()
		d := cacheDump{Identity: id, Clusters: map[string]clusterDump{}, Filtering: map[string]string{}, Table: st.String()}
		for _, c := range clusters {
			cd := clusterDump{Deployments: map[string]string{}}
			for _, f := range foos.In(c).Informer().Lister().List(nil) {
				cd.Foos = append(cd.Foos, cache.KeyOf(f).String())
			}
			for _, dep := range deps.In(c).Informer().Lister().List(nil) {
				owner := ""
				if ref := metav1.GetControllerOf(dep); ref != nil {
					owner = ref.Name
				}
				cd.Deployments[cache.KeyOf(dep).String()] = owner
			}
			d.Clusters[c] = cd
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
