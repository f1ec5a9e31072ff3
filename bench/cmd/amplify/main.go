// Command amplify measures how much work a controller does per external
// change: reconciles and API requests. Each owner (a Foo) has 10 children
// (ConfigMaps) whose data follow the owner's spec.replicas; the owner's
// status counts the children another program marked ready (annotation
// "ext") and records the generation it saw. Once the owners have settled, an
// external writer makes changes at a fixed rate, alternating between an
// owner's spec (its replicas, which the controller copies into the 10
// children) and a child's annotation (a status another controller moves,
// which the controller counts into the owner's status). Three sides run in
// turn, each in a namespace of its own, against one control plane
// (package testenv) started by the command:
//
//   - kloop: a kloop App, For Foos and Owns ConfigMaps, the default options
//     (a reconcile woken only by the key's own writes is skipped);
//   - kloop-skip-off: the same with controller.Options.ReconcileOwnWrites;
//   - controller-runtime: a controller as its users write it, For Foos with
//     predicate.GenerationChangedPredicate (so its own status writes do not
//     wake it) and Owns ConfigMaps (whose changes it needs).
//
// The reconcile is the same function body on each side, reading from the
// side's cache. A side's figures run from the first external change until
// the owners reflect the last one and the side has been quiet for a second:
// reconciles per external change, and requests its client sent to the API
// server per external change (every request, watches included, counted as it
// starts). RESULT lines compare kloop with controller-runtime; kloop with
// the skip off is printed for reference.
//
// With AMPLIFY_CAUSES set, the kloop sides print each reconcile's causes
// (and its error) to stderr: what woke the reconciles that were not skipped.
//
// Run with: cd bench && go run ./cmd/amplify [-owners 20] [-changes 400] [-rate 40]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
)

const children = 10

func main() {
	owners := flag.Int("owners", 20, "owners (Foos), each with 10 children")
	changes := flag.Int("changes", 400, "external changes per side")
	rate := flag.Float64("rate", 40, "external changes a second")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	crlog.SetLogger(logr.Discard())
	if err := run(*owners, *changes, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "amplify:", err)
		os.Exit(1)
	}
}

// figures are one side's.
type figures struct {
	reconciles, requests, changes int64
	took                          time.Duration
}

func (f figures) perChange(n int64) float64 { return float64(n) / float64(f.changes) }

func run(owners, changes int, rate float64) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	if err := manifest.InstallCRD(ctx, cfg, foo.CRDYAML); err != nil {
		return err
	}
	sides := []string{"kloop", "kloop-skip-off", "controller-runtime"}
	got := map[string]figures{}
	for _, s := range sides {
		f, err := runSide(ctx, cfg, s, owners, changes, rate)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		got[s] = f
		fmt.Printf("side %-18s changes=%d reconciles=%d requests=%d took=%v reconciles/change=%.2f requests/change=%.2f\n",
			s, f.changes, f.reconciles, f.requests, f.took.Round(time.Millisecond), f.perChange(f.reconciles), f.perChange(f.requests))
	}
	k, off, p := got["kloop"], got["kloop-skip-off"], got["controller-runtime"]
	for _, r := range []struct {
		name      string
		k, off, p float64
	}{
		{"reconciles-per-change", k.perChange(k.reconciles), off.perChange(off.reconciles), p.perChange(p.reconciles)},
		{"api-requests-per-change", k.perChange(k.requests), off.perChange(off.requests), p.perChange(p.requests)},
	} {
		fmt.Printf("RESULT %s kloop=%.2f peer=%.2f ratio=%.2f unit=per-change peer_name=controller-runtime\n", r.name, r.k, r.p, r.k/r.p)
		fmt.Printf("RESULT %s-skip-off kloop=%.2f peer=%.2f ratio=%.2f unit=per-change peer_name=kloop-reconcile-own-writes\n", r.name, r.k, r.off, r.k/r.off)
	}
	return nil
}

// counting counts the requests a side's client sends.
type counting struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// world is the reconcile's view and writes, whichever side runs it.
type world interface {
	getFoo(ctx context.Context, ns, name string) (*v1alpha1.Foo, error)
	children(ctx context.Context, f *v1alpha1.Foo) ([]*corev1.ConfigMap, error)
	create(ctx context.Context, cm *corev1.ConfigMap) error
	update(ctx context.Context, cm *corev1.ConfigMap) error
	updateStatus(ctx context.Context, f *v1alpha1.Foo) error
}

func childName(f *v1alpha1.Foo, i int) string { return f.Name + "-" + strconv.Itoa(i) }

// reconcileFoo is the one reconcile of every side: the children follow the
// owner's replicas; the owner's status counts the children marked ready.
func reconcileFoo(ctx context.Context, w world, ns, name string) error {
	f, err := w.getFoo(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kids, err := w.children(ctx, f)
	if err != nil {
		return err
	}
	byName := map[string]*corev1.ConfigMap{}
	for _, c := range kids {
		byName[c.Name] = c
	}
	want := strconv.Itoa(int(ptr.Deref(f.Spec.Replicas, 1)))
	ready := int32(0)
	for i := range children {
		c, ok := byName[childName(f, i)]
		if !ok {
			c = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: childName(f, i), Labels: map[string]string{"owner": f.Name},
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(f, v1alpha1.Kind)}},
				Data: map[string]string{"replicas": want},
			}
			if err := w.create(ctx, c); err != nil {
				return err
			}
			continue
		}
		if c.Annotations["ext"] != "" {
			ready++
		}
		if c.Data["replicas"] != want {
			c = c.DeepCopy()
			if c.Data == nil {
				c.Data = map[string]string{}
			}
			c.Data["replicas"] = want
			if err := w.update(ctx, c); err != nil {
				return err
			}
		}
	}
	if f.Status.AvailableReplicas != ready || f.Status.ObservedGeneration != f.Generation {
		f = f.DeepCopy()
		f.Status.AvailableReplicas, f.Status.ObservedGeneration = ready, f.Generation
		return w.updateStatus(ctx, f)
	}
	return nil
}

// kloopWorld is a kloop App's handles.
type kloopWorld struct {
	foos *kloop.Handle[*v1alpha1.Foo]
	cms  *kloop.Handle[*corev1.ConfigMap]
}

func (w kloopWorld) getFoo(ctx context.Context, ns, name string) (*v1alpha1.Foo, error) {
	return w.foos.Get(ctx, ns, name)
}

func (w kloopWorld) children(ctx context.Context, f *v1alpha1.Foo) ([]*corev1.ConfigMap, error) {
	return w.cms.List(ctx, f.Namespace, labels.SelectorFromSet(labels.Set{"owner": f.Name}))
}

func (w kloopWorld) create(ctx context.Context, cm *corev1.ConfigMap) error {
	_, err := w.cms.Create(ctx, cm)
	return err
}

func (w kloopWorld) update(ctx context.Context, cm *corev1.ConfigMap) error {
	_, err := w.cms.Update(ctx, cm)
	return err
}

func (w kloopWorld) updateStatus(ctx context.Context, f *v1alpha1.Foo) error {
	_, err := w.foos.UpdateStatus(ctx, f)
	return err
}

// crWorld is a controller-runtime manager's client (reads from its cache).
type crWorld struct{ c crclient.Client }

func (w crWorld) getFoo(ctx context.Context, ns, name string) (*v1alpha1.Foo, error) {
	f := &v1alpha1.Foo{}
	err := w.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, f)
	return f, err
}

func (w crWorld) children(ctx context.Context, f *v1alpha1.Foo) ([]*corev1.ConfigMap, error) {
	var l corev1.ConfigMapList
	if err := w.c.List(ctx, &l, crclient.InNamespace(f.Namespace), crclient.MatchingLabels{"owner": f.Name}); err != nil {
		return nil, err
	}
	out := make([]*corev1.ConfigMap, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (w crWorld) create(ctx context.Context, cm *corev1.ConfigMap) error { return w.c.Create(ctx, cm) }
func (w crWorld) update(ctx context.Context, cm *corev1.ConfigMap) error { return w.c.Update(ctx, cm) }
func (w crWorld) updateStatus(ctx context.Context, f *v1alpha1.Foo) error {
	return w.c.Status().Update(ctx, f)
}

// startSide starts one side's controller on ns and returns its counters.
func startSide(ctx context.Context, cfg *rest.Config, side, ns string, reconciles, requests *atomic.Int64) (func() error, error) {
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counting{rt: rt, n: requests} }
	switch side {
	case "kloop", "kloop-skip-off":
		app, err := kloop.New(c, kloop.Options{Name: "amplify", Namespace: ns, Scheme: foo.Scheme(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, err
		}
		w := kloopWorld{
			foos: kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource}),
			cms:  kloop.Objects[*corev1.ConfigMap](app),
		}
		_, err = kloop.NewController(app, "amplify", func(ctx context.Context, key cache.Key) (controller.Result, error) {
			reconciles.Add(1)
			if os.Getenv("AMPLIFY_CAUSES") != "" {
				causes, _ := controller.CausesFrom(ctx)
				fmt.Fprintln(os.Stderr, side, key, causes)
			}
			err := reconcileFoo(ctx, w, key.Namespace, key.Name)
			if err != nil && os.Getenv("AMPLIFY_CAUSES") != "" {
				fmt.Fprintln(os.Stderr, side, key, "error:", err)
			}
			return controller.Result{}, err
		}).For(w.foos).Owns(w.cms).WithOptions(func(o *controller.Options[cache.Key]) {
			o.ReconcileOwnWrites = side == "kloop-skip-off"
		}).Complete()
		if err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		select {
		case <-app.Ready():
		case err := <-done:
			return nil, err
		}
		return func() error { return <-done }, nil
	case "controller-runtime":
		sch := runtime.NewScheme()
		if err := errors.Join(clientgoscheme.AddToScheme(sch), v1alpha1.AddToScheme(sch)); err != nil {
			return nil, err
		}
		mgr, err := ctrl.NewManager(c, ctrl.Options{
			Scheme:                 sch,
			Metrics:                crmetrics.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}},
		})
		if err != nil {
			return nil, err
		}
		w := crWorld{c: mgr.GetClient()}
		err = ctrl.NewControllerManagedBy(mgr).
			For(&v1alpha1.Foo{}, crbuilder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Owns(&corev1.ConfigMap{}).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				reconciles.Add(1)
				return reconcile.Result{}, reconcileFoo(ctx, w, req.Namespace, req.Name)
			}))
		if err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(syncCtx) {
			return nil, errors.New("controller-runtime cache did not sync")
		}
		return func() error { return <-done }, nil
	}
	return nil, fmt.Errorf("unknown side %q", side)
}

func runSide(parent context.Context, cfg *rest.Config, side string, owners, changes int, rate float64) (figures, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return figures{}, err
	}
	ns := "amplify-" + side
	if _, err := kc.CoreV1().Namespaces().Create(parent, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return figures{}, err
	}
	fooc, err := newFooClient(cfg)
	if err != nil {
		return figures{}, err
	}
	for i := range owners {
		f := &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner-" + strconv.Itoa(i)},
			Spec: v1alpha1.FooSpec{DeploymentName: "unused-" + strconv.Itoa(i), Replicas: ptr.To[int32](1)}}
		if err := fooc.Post().Namespace(ns).Resource("foos").Body(f).Do(parent).Error(); err != nil {
			return figures{}, err
		}
	}
	ctx, cancel := context.WithCancel(parent)
	var reconciles, requests atomic.Int64
	wait, err := startSide(ctx, cfg, side, ns, &reconciles, &requests)
	if err != nil {
		cancel()
		return figures{}, err
	}
	defer func() {
		cancel()
		_ = wait()
	}()

	// Settled: every owner's status reflects its generation and the
	// children marked ready, and the side has been quiet for a second.
	settle := func() error {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			ok, err := settled(parent, fooc, kc, ns, owners)
			if err != nil {
				return err
			}
			if ok {
				before := reconciles.Load()
				time.Sleep(time.Second)
				if reconciles.Load() == before {
					return nil
				}
				continue
			}
			if time.Now().After(deadline) {
				return errors.New("the owners did not settle within 5 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := settle(); err != nil {
		return figures{}, err
	}

	r0, q0, start := reconciles.Load(), requests.Load(), time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := range changes {
		<-tick.C
		owner := (i / 2) % owners
		name := "owner-" + strconv.Itoa(owner)
		if i%2 == 0 {
			replicas := 1 + (i/2/owners+1)%2
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
			if err := fooc.Patch(types.MergePatchType).Namespace(ns).Resource("foos").Name(name).Body([]byte(patch)).Do(parent).Error(); err != nil {
				return figures{}, err
			}
			continue
		}
		child := fmt.Sprintf("%s-%d", name, (i/2/owners)%children)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"ext":"%d"}}}`, i)
		if _, err := kc.CoreV1().ConfigMaps(ns).Patch(parent, child, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "external"}); err != nil {
			return figures{}, err
		}
	}
	if err := settle(); err != nil {
		return figures{}, err
	}
	return figures{reconciles: reconciles.Load() - r0, requests: requests.Load() - q0, changes: int64(changes), took: time.Since(start)}, nil
}

// settled reports whether every owner's status and children reflect the
// latest external writes.
func settled(ctx context.Context, fooc *rest.RESTClient, kc kubernetes.Interface, ns string, owners int) (bool, error) {
	var foos v1alpha1.FooList
	if err := fooc.Get().Namespace(ns).Resource("foos").Do(ctx).Into(&foos); err != nil {
		return false, err
	}
	cms, err := kc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner"})
	if err != nil {
		return false, err
	}
	ready := map[string]int32{}
	kids := map[string]int{}
	want := map[string]string{}
	for _, f := range foos.Items {
		want[f.Name] = strconv.Itoa(int(ptr.Deref(f.Spec.Replicas, 1)))
	}
	for _, c := range cms.Items {
		o := c.Labels["owner"]
		if c.Data["replicas"] != want[o] {
			return false, nil
		}
		kids[o]++
		if c.Annotations["ext"] != "" {
			ready[o]++
		}
	}
	if len(foos.Items) != owners {
		return false, nil
	}
	for _, f := range foos.Items {
		if kids[f.Name] != children || f.Status.ObservedGeneration != f.Generation || f.Status.AvailableReplicas != ready[f.Name] {
			return false, nil
		}
	}
	return true, nil
}

// newFooClient is a REST client for Foos.
func newFooClient(cfg *rest.Config) (*rest.RESTClient, error) {
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	return rest.RESTClientFor(c)
}
