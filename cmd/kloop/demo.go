package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/watcher"
)

func demoCommand() *cobra.Command {
	f := &controlPlaneFlags{logging: cli.Logging{Level: "warn", Format: "text"}}
	namespace := "default"
	debugAddr := "127.0.0.1:0"
	clusters := 1
	shards := shardDemoOptions{replicas: 1, namespaces: 30, foosPerNS: 2, handover: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the local control plane with podsim and the Foo controller, apply example-foo.yaml and print what happens",
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, cpLog, err := f.loggers(cmd)
			if err != nil {
				return err
			}
			if clusters > 1 {
				if code := fleetDemo(clusters, shards.replicas, f.dataDir, f.binDir, namespace, debugAddr, log, cpLog, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					return cli.ExitCode(code)
				}
				return nil
			}
			if shards.replicas > 1 {
				if code := shardDemo(f.dataDir, f.binDir, debugAddr, shards, log, cpLog, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					return cli.ExitCode(code)
				}
				return nil
			}
			if code := demo(f.dataDir, f.binDir, namespace, debugAddr, log, cpLog, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				return cli.ExitCode(code)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&namespace, "namespace", namespace, "namespace of the example Foo; only it is watched and printed")
	cmd.Flags().StringVar(&debugAddr, "debug-bind-address", debugAddr, "serve the Foo controller's live debug page at this loopback host:port (default: a free port, printed at start); 0 turns it off")
	cmd.Flags().IntVar(&clusters, "clusters", clusters, "start this many control planes and run one Foo controller over all of them as a fleet (each line names its cluster); with --replicas, that many replicas share the fleet (sharding)")
	addShardDemoFlags(cmd, &shards)
	return cmd
}

// demo runs the whole sample on a local control plane: the Foo CRD, podsim,
// the Foo controller and example-foo.yaml, printing one line per change of
// the Foos, Deployments, pods and events of the namespace until a signal.
// The controllers log to log, the control plane to cpLog. The Foo
// controller's debug page is served at debugAddr unless it is "" or "0". It
// returns the exit code.
func demo(dataDir, binDir, namespace, debugAddr string, log, cpLog *slog.Logger, stdout, stderr io.Writer) int {
	out := &printer{w: stdout, last: map[string]string{}}

	ctx, in := notifyInterrupts(stderr)
	defer in.stop()
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	env, code := startControlPlane(ctx, in, "kloop demo", testenv.Options{
		DataDir:           dataDir,
		ControllerManager: true,
		BinDir:            binDir,
		Logger:            cpLog,
	}, stderr)
	if env == nil {
		return code
	}
	defer func() {
		env.Stop()
		in.forget()
	}()
	out.printf("# control plane ready at %s; point kubectl at it with:\nexport KUBECONFIG=%s\n", env.APIServerURL, env.KubeconfigPath)

	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		return exitCode(ctx, "kloop demo", err, stderr)
	}
	out.printf("# installed CRD foos.samplecontroller.k8s.io; starting podsim (node %s) and the Foo controller\n", podsim.DefaultNodeName)

	var wg sync.WaitGroup
	failed := make(chan error, 4) // the three below and applyExample
	goRun := func(what string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				failed <- fmt.Errorf("%s: %w", what, err)
				stop()
			}
		})
	}
	goRun("podsim", func(ctx context.Context) error {
		return podsim.Run(ctx, env.Config, podsim.Options{Logger: log.With("component", "podsim"), Registry: prometheus.NewRegistry()})
	})
	app, err := kloop.New(env.Config, kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), Logger: log.With("component", "foo-controller"),
		Registry: prometheus.NewRegistry(), DebugAddr: debugAddr})
	if err == nil {
		err = foo.Setup(app, foo.DefaultWorkers)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kloop demo: %v\n", err)
		return 1
	}
	page := app.Debug()
	goRun("foo controller", app.Run)
	if page != nil {
		select {
		case <-page.AddrReady():
			if page.URL(debug.PagePath) != "" {
				out.printf("# the Foo controller's live page: %s (its JSON: %s)\n", page.URL(debug.PagePath), page.URL(debug.SnapshotPath))
			}
		case <-ctx.Done():
		}
	}
	synced := make(chan struct{})
	goRun("printer", func(ctx context.Context) error { return out.watch(ctx, env.Config, namespace, log, synced) })

	select {
	case <-synced:
		if err := applyExample(ctx, env.Config, namespace, out); err != nil && ctx.Err() == nil {
			failed <- err
			stop()
		}
	case <-ctx.Done():
	}

	<-ctx.Done()
	stop()
	fmt.Fprintln(stderr, "stopping")
	wg.Wait()
	close(failed)
	code = 0
	for err := range failed {
		fmt.Fprintf(stderr, "kloop demo: %v\n", err)
		code = 1
	}
	return code
}

// applyExample creates sample-controller's example-foo.yaml in namespace,
// unless a Foo of that name is there already (from an earlier run with the
// same --data-dir).
func applyExample(ctx context.Context, cfg *rest.Config, namespace string, out *printer) error {
	f, err := manifest.Decode[*v1alpha1.Foo](foo.Scheme(), foo.ExampleFooYAML)
	if err != nil {
		return err
	}
	f.Namespace = namespace
	c, err := client.New(cfg, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		return err
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, c, namespace); err != nil {
		return err
	}
	_, err = foos.Create(ctx, f)
	switch {
	case apierrors.IsAlreadyExists(err):
		out.printf("# Foo %s/%s exists already\n", namespace, f.Name)
	case err != nil:
		return fmt.Errorf("apply example-foo.yaml: %w", err)
	default:
		out.printf("# applied example-foo.yaml: Foo %s/%s, deploymentName %s, replicas %d\n", namespace, f.Name, f.Spec.DeploymentName, ptr.Deref(f.Spec.Replicas, 0))
	}
	out.printf("# try, with KUBECONFIG exported:\n#   kubectl patch foo %s --type merge -p '{\"spec\":{\"replicas\":3}}'\n#   kubectl delete foo %s\n# Ctrl-C stops everything.\n", f.Name, f.Name)
	return nil
}

// ensureNamespace creates namespace unless it exists.
func ensureNamespace(ctx context.Context, c *client.Client, namespace string) error {
	nss, err := client.NewResource[*corev1.Namespace](c, corev1.SchemeGroupVersion.WithResource("namespaces"))
	if err != nil {
		return err
	}
	_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}

// printer writes one line per change it sees, never the same line twice in
// a row for an object.
type printer struct {
	mu   sync.Mutex
	w    io.Writer
	last map[string]string // object → its last line
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
	if f, ok := p.w.(*os.File); ok {
		_ = f.Sync()
	}
}

// show prints line for object id unless it is what was printed last for it.
func (p *printer) show(id, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last[id] == line {
		return
	}
	p.last[id] = line
	fmt.Fprintf(p.w, "%-34s %s\n", id, line)
}

func (p *printer) gone(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, id)
	fmt.Fprintf(p.w, "%-34s deleted\n", id)
}

// watch prints the Foos, Deployments, pods and events of namespace until
// ctx is done; synced is closed once it has printed what exists.
func (p *printer) watch(ctx context.Context, cfg *rest.Config, namespace string, log *slog.Logger, synced chan<- struct{}) error {
	reg := prometheus.NewRegistry()
	f := informer.NewFactory(cfg, informer.FactoryOptions{Scheme: foo.Scheme(), Logger: log, Registerer: reg})
	scope := informer.Scope{Namespace: namespace}
	foos, err := informer.OfResource[*v1alpha1.Foo](f, v1alpha1.Resource, scope)
	if err != nil {
		return err
	}
	deployments, err := informer.Of[*appsv1.Deployment](f, scope)
	if err != nil {
		return err
	}
	pods, err := informer.Of[*corev1.Pod](f, scope)
	if err != nil {
		return err
	}
	events, err := informer.Of[*corev1.Event](f, scope)
	if err != nil {
		return err
	}
	if err := addPrinter(p, foos, "foo/", fooLine); err != nil {
		return err
	}
	if err := addPrinter(p, deployments, "deployment/", deploymentLine); err != nil {
		return err
	}
	if err := addPrinter(p, pods, "pod/", podLine); err != nil {
		return err
	}
	// Events: each new one once; their repeats only raise a count.
	if _, err := events.AddHandler(informer.HandlerFuncs[*corev1.Event]{
		AddFunc: func(ev *corev1.Event, _ bool) {
			if ev.InvolvedObject.Kind != "Foo" && ev.InvolvedObject.Kind != "Deployment" && ev.InvolvedObject.Kind != "ReplicaSet" {
				return
			}
			p.show("event "+ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name+" "+ev.Reason, fmt.Sprintf("%s: %s", ev.Type, ev.Message))
		},
	}, informer.HandlerOptions{Name: "print-events"}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- f.Start(runCtx) }()
	waitCtx, cancelWait := context.WithTimeout(runCtx, 2*time.Minute)
	err = f.WaitForSync(waitCtx)
	cancelWait()
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			err = nil // stopped before the caches filled: not a failure
		}
		return errors.Join(err, <-errc)
	}
	close(synced)
	return <-errc
}

func addPrinter[T watcher.Object](p *printer, inf *informer.Informer[T], prefix string, line func(T) string) error {
	_, err := inf.AddHandler(informer.HandlerFuncs[T]{
		AddFunc:    func(obj T, _ bool) { p.show(prefix+obj.GetName(), line(obj)) },
		UpdateFunc: func(_, obj T) { p.show(prefix+obj.GetName(), line(obj)) },
		DeleteFunc: func(obj T, finalStateUnknown bool) { p.gone(prefix + cache.KeyOf(obj).Name) },
	}, informer.HandlerOptions{Name: "print-" + strings.TrimSuffix(prefix, "/")})
	return err
}

func fooLine(f *v1alpha1.Foo) string {
	replicas := "-"
	if f.Spec.Replicas != nil {
		replicas = fmt.Sprint(*f.Spec.Replicas)
	}
	return fmt.Sprintf("deploymentName=%s spec.replicas=%s status.availableReplicas=%d", f.Spec.DeploymentName, replicas, f.Status.AvailableReplicas)
}

func deploymentLine(d *appsv1.Deployment) string {
	owner := "-"
	for _, r := range d.OwnerReferences {
		if ptr.Deref(r.Controller, false) {
			owner = r.Kind + "/" + r.Name
		}
	}
	return fmt.Sprintf("replicas=%d ready=%d available=%d owner=%s", ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas, d.Status.AvailableReplicas, owner)
}

func podLine(pod *corev1.Pod) string {
	state := string(pod.Status.Phase)
	if pod.DeletionTimestamp != nil {
		state = "Terminating"
	} else if podsim.Running(pod) {
		state = "Running,Ready"
	}
	node, ip := pod.Spec.NodeName, pod.Status.PodIP
	if node == "" {
		node = "-"
	}
	if ip == "" {
		ip = "-"
	}
	return fmt.Sprintf("%s node=%s ip=%s", state, node, ip)
}
