package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/fleet"
	"github.com/kloop-dev/kloop/internal/kubeconfig"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
)

// clusterName is the fleet demo's name of its i-th control plane (from 0).
func clusterName(i int) string { return fmt.Sprintf("c%d", i+1) }

// fleetDemo is demo over n control planes at once: one Foo controller runs
// over all of them as a fleet (the first is its home cluster, the others
// come from a directory of kubeconfig files), example-foo.yaml is applied
// in each, and every printed line names its cluster. With replicas > 1,
// that many Foo-controller replicas share the fleet as one shard group
// (its Leases in the first cluster), each reconciling its share of every
// cluster.
func fleetDemo(n, replicas int, dataDir, binDir, namespace, debugAddr string, log, cpLog *slog.Logger, stdout, stderr io.Writer) int {
	ctx, in := notifyInterrupts(stderr)
	defer in.stop()
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	envs := make([]*testenv.Env, n)
	codes := make([]int, n)
	var started sync.WaitGroup
	for i := range envs {
		opts := testenv.Options{ControllerManager: true, BinDir: binDir, Logger: cpLog.With("cluster", clusterName(i))}
		if dataDir != "" {
			opts.DataDir = filepath.Join(dataDir, clusterName(i))
		}
		started.Go(func() { envs[i], codes[i] = startControlPlane(ctx, in, "kloop demo", opts, stderr) })
	}
	started.Wait()
	defer func() {
		for _, env := range envs {
			if env != nil {
				env.Stop()
			}
		}
		in.forget()
	}()
	for i, env := range envs {
		if env == nil {
			return codes[i]
		}
	}
	kubeconfigs, err := os.MkdirTemp("", "kloop-fleet-")
	if err != nil {
		fmt.Fprintf(stderr, "kloop demo: %v\n", err)
		return 1
	}
	defer os.RemoveAll(kubeconfigs)
	outs := make([]*printer, n)
	var mu sync.Mutex // one line at a time across the clusters' printers
	for i, env := range envs {
		outs[i] = &printer{w: prefixed{w: stdout, mu: &mu, prefix: fmt.Sprintf("[%s] ", clusterName(i))}, last: map[string]string{}}
		outs[i].printf("# control plane %s ready at %s; point kubectl at it with:\nexport KUBECONFIG=%s\n", clusterName(i), env.APIServerURL, env.KubeconfigPath)
		if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
			return exitCode(ctx, "kloop demo", err, stderr)
		}
		if i > 0 {
			if err := kubeconfig.Write(filepath.Join(kubeconfigs, clusterName(i)+".kubeconfig"), env.Config); err != nil {
				fmt.Fprintf(stderr, "kloop demo: %v\n", err)
				return 1
			}
		}
	}

	var wg sync.WaitGroup
	failed := make(chan error, 3*n+max(replicas, 1))
	goRun := func(what string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				failed <- fmt.Errorf("%s: %w", what, err)
				stop()
			}
		})
	}
	for i, env := range envs {
		goRun("podsim in "+clusterName(i), func(ctx context.Context) error {
			return podsim.Run(ctx, env.Config, podsim.Options{Logger: log.With("component", "podsim", "cluster", clusterName(i)), Registry: prometheus.NewRegistry()})
		})
	}
	var apps []*kloop.App
	for r := range max(replicas, 1) {
		app, err := startFleetReplica(ctx, envs[0], r, replicas, kubeconfigs, debugAddr, log)
		if err != nil {
			fmt.Fprintf(stderr, "kloop demo: %v\n", err)
			stop()
			wg.Wait()
			return 1
		}
		apps = append(apps, app)
		goRun(fmt.Sprintf("foo controller %d", r+1), app.Run)
	}
	if replicas > 1 {
		fmt.Fprintf(stdout, "# %d Foo-controller replicas share the %d clusters: shard group %s, Leases in namespace %s of %s\n", replicas, n, shardDemoGroup, shardDemoGroup, clusterName(0))
	}
	if page := apps[0].Debug(); page != nil {
		select {
		case <-page.AddrReady():
			if page.URL(debug.PagePath) != "" {
				fmt.Fprintf(stdout, "# the Foo controller's live page, with its clusters: %s\n", page.URL(debug.PagePath))
			}
		case <-ctx.Done():
		}
	}
	for i, env := range envs {
		synced := make(chan struct{})
		goRun("printer of "+clusterName(i), func(ctx context.Context) error { return outs[i].watch(ctx, env.Config, namespace, log, synced) })
		goRun("example in "+clusterName(i), func(ctx context.Context) error {
			select {
			case <-synced:
				if err := applyExample(ctx, env.Config, namespace, outs[i]); err != nil && ctx.Err() == nil {
					return err
				}
			case <-ctx.Done():
			}
			return nil
		})
	}

	<-ctx.Done()
	stop()
	fmt.Fprintln(stderr, "stopping")
	wg.Wait()
	close(failed)
	code := 0
	for err := range failed {
		fmt.Fprintf(stderr, "kloop demo: %v\n", err)
		code = 1
	}
	return code
}

// startFleetReplica makes replica r of the fleet demo's Foo controller:
// its App in the home cluster (sharded when there are several replicas),
// its fleet of every control plane, and the Foo reconciler over it. Only
// the first serves the debug page.
func startFleetReplica(ctx context.Context, home *testenv.Env, r, replicas int, kubeconfigs, debugAddr string, log *slog.Logger) (*kloop.App, error) {
	opts := kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), Logger: log.With("component", "foo-controller"), Registry: prometheus.NewRegistry()}
	if r == 0 {
		opts.DebugAddr = debugAddr
	}
	if replicas > 1 {
		c, err := client.New(home.Config, client.Options{DisableWriteTracking: true})
		if err != nil {
			return nil, err
		}
		if err := ensureNamespace(ctx, c, shardDemoGroup); err != nil {
			return nil, err
		}
		id := fmt.Sprintf("replica-%d", r+1)
		opts.Logger = opts.Logger.With("replica", id)
		opts.Sharding = &kloop.Sharding{Group: shardDemoGroup, Namespace: shardDemoGroup, Identity: id,
			LeaseDuration: shardDemoLease, RenewDeadline: shardDemoRenew, RetryPeriod: shardDemoRetry}
	}
	app, err := kloop.New(home.Config, opts)
	if err != nil {
		return nil, err
	}
	f, err := fleet.New(app, fleet.Options{Home: clusterName(0), KubeconfigDir: kubeconfigs})
	if err != nil {
		return nil, err
	}
	return app, setupFleetFoo(f)
}

// setupFleetFoo declares the Foo sample's reconciler over the App's fleet:
// a key's Foo is read, and its Deployment made, in the key's cluster.
func setupFleetFoo(f *fleet.Fleet) error {
	foos := fleet.Objects[*v1alpha1.Foo](f, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	deps := fleet.Objects[*appsv1.Deployment](f).WithTransform(foo.LeanDeployment)
	_, err := fleet.NewController(f, foo.ControllerName, func(ctx context.Context, k fleet.Key) (controller.Result, error) {
		c := f.Cluster(k.Cluster)
		if c == nil {
			return controller.Result{}, nil
		}
		r := foo.Reconciler{Foos: foos.In(k.Cluster), Deployments: deps.In(k.Cluster), Recorder: c.Recorder(), Logger: c.Logger()}
		return r.Reconcile(ctx, k.Key)
	}).For(foos).Owns(deps).Workers(foo.DefaultWorkers).Complete()
	return err
}

// prefixed writes each line with a prefix (a cluster's name), a whole
// write at a time under a lock shared by the printers.
type prefixed struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	start := true
	for _, c := range b {
		if start {
			out = append(out, p.prefix...)
		}
		out = append(out, c)
		start = c == '\n'
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
