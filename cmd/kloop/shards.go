package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
)

// shardDemoOptions are the flags of kloop demo --replicas N (N > 1).
type shardDemoOptions struct {
	replicas   int
	namespaces int
	foosPerNS  int
	handover   time.Duration // stop and restart the last replica this often; 0: never
}

// addShardDemoFlags adds demo's flags for several replicas.
func addShardDemoFlags(cmd *cobra.Command, o *shardDemoOptions) {
	fs := cmd.Flags()
	fs.IntVar(&o.replicas, "replicas", o.replicas, "run this many Foo-controller replicas sharing the Foos (sharding) instead of the single-replica demo; with more than 1 no podsim runs and --namespace is not used")
	fs.IntVar(&o.namespaces, "namespaces", o.namespaces, "with --replicas: namespaces of Foos to share")
	fs.IntVar(&o.foosPerNS, "foos-per-namespace", o.foosPerNS, "with --replicas: Foos in each namespace")
	fs.DurationVar(&o.handover, "handover-every", o.handover, "with --replicas: stop the last replica this often and start it again the next time, to show a handover; 0 never does")
}

// The shard group of the demo: its Leases' namespace and timings (short,
// so that handovers show quickly).
const (
	shardDemoGroup = "kloop-demo"
	shardDemoLease = 6 * time.Second
	shardDemoRenew = 4 * time.Second
	shardDemoRetry = time.Second
)

// shardDemo runs kloop demo --replicas N: the local control plane (sharded
// list and watch on), the Foo CRD, namespaces×foosPerNS Foos, and N
// Foo-controller replicas in this process sharing them as one shard group
// (kloop.Options.Sharding). It prints a line per replica (slots, Foos
// cached, reconciles) whenever the split changes, the shard table once it
// settles, and every replica's debug page; every handover interval it stops
// the last replica and starts it again, to show its slots moving and
// coming back without overlap. It returns the exit code.
func shardDemo(dataDir, binDir, debugAddr string, o shardDemoOptions, log, cpLog *slog.Logger, stdout, stderr io.Writer) int {
	out := &printer{w: stdout, last: map[string]string{}}
	ctx, in := notifyInterrupts(stderr)
	defer in.stop()
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	env, code := startControlPlane(ctx, in, "kloop demo", testenv.Options{DataDir: dataDir, BinDir: binDir, Logger: cpLog}, stderr)
	if env == nil {
		return code
	}
	defer func() {
		env.Stop()
		in.forget()
	}()
	out.printf("# control plane ready at %s (sharded list and watch on); point kubectl at it with:\nexport KUBECONFIG=%s\n", env.APIServerURL, env.KubeconfigPath)
	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		return exitCode(ctx, "kloop demo", err, stderr)
	}
	total, err := createDemoFoos(ctx, env.Config, o)
	if err != nil {
		return exitCode(ctx, "kloop demo", err, stderr)
	}
	out.printf("# %d Foos in %d namespaces; starting %d Foo-controller replicas in shard group %s (Leases in namespace %s)\n", total, o.namespaces, o.replicas, shardDemoGroup, shardDemoGroup)

	d := &shardDemoRun{out: out, log: log, cfg: env.Config, debugAddr: debugAddr, total: total, changed: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	for i := range o.replicas {
		if err := d.start(ctx, &wg, fmt.Sprintf("replica-%d", i+1)); err != nil {
			fmt.Fprintf(stderr, "kloop demo: %v\n", err)
			stop()
			wg.Wait()
			return 1
		}
	}
	wg.Go(func() { d.report(ctx) })
	if o.handover > 0 {
		wg.Go(func() { d.cycle(ctx, &wg, fmt.Sprintf("replica-%d", o.replicas), o.handover) })
	}
	out.printf("# every replica keeps its share; try, with KUBECONFIG exported:\n#   kubectl get leases -n %s -L %s\n#   kubectl get deployments -A | wc -l\n# Ctrl-C stops everything.\n", shardDemoGroup, sharding.GroupLabel)

	<-ctx.Done()
	stop()
	fmt.Fprintln(stderr, "stopping")
	wg.Wait()
	if err := d.err(); err != nil {
		fmt.Fprintf(stderr, "kloop demo: %v\n", err)
		return 1
	}
	return 0
}

// createDemoFoos makes the namespaces (named like generated ones: the hash
// that places them spreads those well) and their Foos, unless they exist.
func createDemoFoos(ctx context.Context, cfg *rest.Config, o shardDemoOptions) (int, error) {
	c, err := client.New(cfg, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		return 0, err
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		return 0, err
	}
	if err := ensureNamespace(ctx, c, shardDemoGroup); err != nil {
		return 0, err
	}
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	total := 0
	for i := range o.namespaces {
		// A fixed, generated-looking suffix per index: the same names on
		// every run, so that --data-dir finds them again.
		h := slots.Hash(fmt.Sprint("kloop-demo-", i))
		var b strings.Builder
		for range 5 {
			b.WriteByte(letters[h%uint64(len(letters))])
			h /= uint64(len(letters))
		}
		ns := "team-" + b.String()
		if err := ensureNamespace(ctx, c, ns); err != nil {
			return 0, err
		}
		for j := range o.foosPerNS {
			name := fmt.Sprintf("foo-%d", j)
			_, err := foos.Create(ctx, &v1alpha1.Foo{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       v1alpha1.FooSpec{DeploymentName: name, Replicas: ptr.To[int32](1)},
			})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return 0, fmt.Errorf("create Foo %s/%s: %w", ns, name, err)
			}
			total++
		}
	}
	return total, nil
}

// shardDemoRun holds the running replicas.
type shardDemoRun struct {
	out       *printer
	log       *slog.Logger
	cfg       *rest.Config
	debugAddr string
	total     int
	changed   chan struct{} // a replica's status changed

	mu       sync.Mutex
	replicas map[string]*demoReplica
	order    []string
	errs     []error
}

type demoReplica struct {
	id     string
	app    *kloop.App
	foos   *informer.Informer[*v1alpha1.Foo]
	deps   *informer.Informer[*appsv1.Deployment]
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

func (d *shardDemoRun) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.errs...)
}

// start runs one replica until ctx is done or it is stopped.
func (d *shardDemoRun) start(ctx context.Context, wg *sync.WaitGroup, id string) error {
	reg := prometheus.NewRegistry()
	app, err := kloop.New(d.cfg, kloop.Options{
		Name:     foo.ControllerName,
		Scheme:   foo.Scheme(),
		Logger:   d.log.With("replica", id),
		Registry: reg,
		Sharding: &kloop.Sharding{
			Group:         shardDemoGroup,
			Namespace:     shardDemoGroup,
			Identity:      id,
			LeaseDuration: shardDemoLease,
			RenewDeadline: shardDemoRenew,
			RetryPeriod:   shardDemoRetry,
		},
	})
	if err != nil {
		return err
	}
	if err := foo.Setup(app, foo.DefaultWorkers); err != nil {
		return err
	}
	r := &demoReplica{id: id, app: app, reg: reg, done: make(chan struct{})}
	r.foos = kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource}).Informer()
	r.deps = kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")}).Informer()
	var page *debug.Server
	if d.debugAddr != "" && d.debugAddr != "0" {
		addr := d.debugAddr
		if !strings.HasSuffix(addr, ":0") {
			addr = "127.0.0.1:0" // one port cannot serve several replicas
		}
		if page, err = debug.New(app.Manager(), debug.Options{Addr: addr, Logger: d.log.With("replica", id, "component", "debug")}); err == nil {
			err = app.Manager().Add(page)
		}
		if err != nil {
			return fmt.Errorf("--debug-bind-address: %w", err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	d.mu.Lock()
	if d.replicas == nil {
		d.replicas = map[string]*demoReplica{}
	}
	if !slices.Contains(d.order, id) {
		d.order = append(d.order, id)
	}
	d.replicas[id] = r
	d.mu.Unlock()
	wg.Go(func() {
		defer close(r.done)
		if err := app.Run(rctx); err != nil {
			d.mu.Lock()
			d.errs = append(d.errs, fmt.Errorf("%s: %w", id, err))
			d.mu.Unlock()
		}
	})
	wg.Go(func() {
		for {
			ch := app.Member().StatusChanged()
			select {
			case <-ch:
				select {
				case d.changed <- struct{}{}:
				default:
				}
			case <-rctx.Done():
				return
			}
		}
	})
	if page != nil {
		select {
		case <-page.AddrReady():
			if page.URL(debug.PagePath) != "" {
				d.out.printf("# %s: live page %s (the shard table is on it)\n", id, page.URL(debug.PagePath))
			}
		case <-ctx.Done():
		}
	}
	return nil
}

// stopReplica stops one replica and waits for it.
func (d *shardDemoRun) stopReplica(id string) {
	d.mu.Lock()
	r := d.replicas[id]
	d.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
	d.mu.Lock()
	delete(d.replicas, id)
	d.mu.Unlock()
}

// cycle stops replica id every interval and starts it again the next.
func (d *shardDemoRun) cycle(ctx context.Context, wg *sync.WaitGroup, id string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	running := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if running {
			d.out.printf("# stopping %s: it gives its slots up and deletes its Lease; the others take them over\n", id)
			d.stopReplica(id)
		} else {
			d.out.printf("# starting %s again: it takes its share back once the others let go\n", id)
			if err := d.start(ctx, wg, id); err != nil {
				d.mu.Lock()
				d.errs = append(d.errs, err)
				d.mu.Unlock()
				return
			}
		}
		running = !running
		select {
		case d.changed <- struct{}{}:
		default:
		}
	}
}

// report prints a line per replica whenever the split changes, and the
// shard table once all replicas settle.
func (d *shardDemoRun) report(ctx context.Context) {
	last, lastTable := "", ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.changed:
		}
		d.mu.Lock()
		var rs []*demoReplica
		for _, id := range d.order {
			if r := d.replicas[id]; r != nil {
				rs = append(rs, r)
			}
		}
		d.mu.Unlock()
		var parts, split []string
		settled, deps := len(rs) > 0, 0
		var table, tableKey string
		for _, r := range rs {
			st := r.app.Member().Status()
			settled = settled && st.Settled
			deps += r.deps.Status().Objects
			s := fmt.Sprintf("%s %d slots, %d Foos", r.id, len(st.Scope), r.foos.Status().Objects)
			split = append(split, s)
			parts = append(parts, fmt.Sprintf("%s, %d reconciles", s, int(reconciles(r.reg))))
			if table == "" {
				table = st.String()
				for _, m := range st.Members {
					tableKey += m.Identity + fmt.Sprint(m.Live) + fmt.Sprint(m.Held) + "|"
				}
			}
		}
		line := strings.Join(parts, " | ")
		if settled {
			line += fmt.Sprintf(" — settled, %d of %d Foos' Deployments cached", deps, d.total)
		}
		// Reconcile counts change all the time; print when the split does.
		if key := strings.Join(split, "|") + fmt.Sprint(settled, deps); key != last {
			last = key
			d.out.printf("%s\n", line)
		}
		if settled && tableKey != lastTable {
			lastTable = tableKey
			d.out.printf("%s", indent(table))
		}
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// reconciles sums controller_runtime_reconcile_total in g.
func reconciles(g prometheus.Gatherer) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "controller_runtime_reconcile_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
