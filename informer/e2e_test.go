package informer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/ctxwait"
	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/watcher"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// e2eContext bounds a subtest; when the bound is hit, the cause says what
// was being waited for.
func e2eContext(t *testing.T, d time.Duration, what string) context.Context {
	ctx, cancel := context.WithTimeoutCause(t.Context(), d, fmt.Errorf("%s: still not done after %v", what, d))
	t.Cleanup(cancel)
	return ctx
}

// runFactory starts f and stops it (waiting for Start to return) when the
// test ends.
func runFactory(t *testing.T, f *informer.Factory) {
	t.Helper()
	testwait.Run(t, "factory Start", f.Start)
}

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env := testenv.StartT(t, testenv.Options{})
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ChurnWithRestartsAndCompaction", func(t *testing.T) {
		for _, mode := range []struct {
			name string
			cfg  watcher.Options
		}{
			{"StreamingList", watcher.Options{InitialList: watcher.InitialListStreaming}},
			{"PaginatedList", watcher.Options{InitialList: watcher.InitialListPaginated, PageSize: 100}},
		} {
			t.Run(mode.name, func(t *testing.T) { testChurn(t, env, cfg, cs, strings.ToLower(mode.name), mode.cfg) })
		}
	})
	t.Run("CustomResourceTypedEndToEnd", func(t *testing.T) { testCustomResource(t, cfg, cs) })
	t.Run("MetadataOnlyInformerCachesNoBodies", func(t *testing.T) { testMetadataOnly(t, cfg, cs) })
	t.Run("CachedObjectsAreWhatTheServerHas", func(t *testing.T) { testCachedObjectsMatchTheServer(t, cfg, cs) })
	t.Run("TransformKeepsOnlyWhatItReturns", func(t *testing.T) { testTransform(t, cfg, cs) })
	t.Run("UserWithoutListPermissionGetsForbiddenFromWaitForSync", func(t *testing.T) {
		alice, err := env.UserConfig("alice")
		if err != nil {
			t.Fatal(err)
		}
		f := informer.NewFactory(alice, informer.FactoryOptions{Registerer: prometheus.NewRegistry()})
		if _, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: "default"}); err != nil {
			t.Fatal(err)
		}
		if _, err := informer.Of[*corev1.Namespace](f, informer.Scope{}); err != nil {
			t.Fatal(err)
		}
		runFactory(t, f)
		// Refused: WaitForSync returns at the first 403, long before its
		// deadline.
		const deadline = 2 * time.Minute
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		began := time.Now()
		err = f.WaitForSync(ctx)
		took := time.Since(began)
		t.Logf("WaitForSync after %v: %v", took, err)
		if took > 10*time.Second {
			t.Errorf("WaitForSync returned %v after it began; want it at the first 403, within seconds", took)
		}
		var se *informer.SyncError
		if !errors.As(err, &se) || !apierrors.IsForbidden(err) || !errors.Is(err, informer.ErrRefused) {
			t.Fatalf("err = %v; want a *SyncError with a Forbidden cause and ErrRefused", err)
		}
		msg := err.Error()
		for _, want := range []string{"2 of 2 informers", "configmaps.v1 [namespace=default]", "namespaces.v1 [all namespaces]", "forbidden", `User "alice" cannot list resource "configmaps"`} {
			if !strings.Contains(msg, want) {
				t.Errorf("error does not contain %q:\n%s", want, msg)
			}
		}
	})
	t.Run("NoSuchResourceGetsNotFoundFromWaitForSync", func(t *testing.T) {
		scheme := widgetScheme(t)
		f := informer.NewFactory(cfg, informer.FactoryOptions{Scheme: scheme, Registerer: prometheus.NewRegistry()})
		if _, err := informer.OfResource[*Widget](f, widgetGV.WithResource("gadgets"), informer.Scope{}); err != nil {
			t.Fatal(err)
		}
		runFactory(t, f)
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
		defer cancel()
		err := f.WaitForSync(ctx)
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "gadgets.v1.e2e.kloop.dev") {
			t.Fatalf("err = %v; want NotFound naming gadgets.v1.e2e.kloop.dev", err)
		}
	})
}

// gatedLW holds back every List and Watch while its gate is closed: the
// informer is cut off from the API server, as by a network partition, while
// the test changes things behind its back. It also counts the 410 Gone /
// Expired answers the informer gets, from calls and inside watch streams.
type gatedLW[T watcher.Object] struct {
	lw      watcher.ListerWatcher[T]
	gate    *gate
	expired *atomic.Int64
}

func (g gatedLW[T]) spy(err error) {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		g.expired.Add(1)
	}
}

type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) close() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) reopen() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g gatedLW[T]) List(ctx context.Context, opts metav1.ListOptions) (watcher.ListPage[T], error) {
	if err := g.gate.wait(ctx); err != nil {
		return watcher.ListPage[T]{}, err
	}
	page, err := g.lw.List(ctx, opts)
	g.spy(err)
	return page, err
}

func (g gatedLW[T]) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	if err := g.gate.wait(ctx); err != nil {
		return nil, err
	}
	w, err := g.lw.Watch(ctx, opts)
	g.spy(err)
	if err != nil {
		return nil, err
	}
	sw := &spyWatch{w: w, out: make(chan apiwatch.Event), stop: make(chan struct{}), spy: g.spy}
	go sw.loop()
	return sw, nil
}

// spyWatch passes a watch through, counting its error events. Unlike
// apiwatch.Filter it cannot be left blocked when its reader stops early.
type spyWatch struct {
	w    apiwatch.Interface
	out  chan apiwatch.Event
	stop chan struct{}
	once sync.Once
	spy  func(error)
}

func (s *spyWatch) loop() {
	defer close(s.out)
	for ev := range s.w.ResultChan() {
		if ev.Type == apiwatch.Error {
			s.spy(apierrors.FromObject(ev.Object))
		}
		select {
		case s.out <- ev:
		case <-s.stop:
			return
		}
	}
}

func (s *spyWatch) ResultChan() <-chan apiwatch.Event { return s.out }

func (s *spyWatch) Stop() {
	s.once.Do(func() { close(s.stop) })
	s.w.Stop()
}

// counter is a handler that keeps the view its notifications build and
// checks that they are consistent with it.
type counter struct {
	mu         sync.Mutex
	view       map[string]string // name → resourceVersion
	unknown    int               // deletes with FinalStateUnknown
	violations []string
	seen       map[string]chan struct{} // closed when the name is seen at its awaited rv
	awaitRV    map[string]string
	changed    await.Signal // after every notification
}

func newCounter() *counter {
	return &counter{view: map[string]string{}, seen: map[string]chan struct{}{}, awaitRV: map[string]string{}}
}

func (c *counter) await(name, rv string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.seen[name], c.awaitRV[name] = ch, rv
	if c.view[name] == rv {
		close(ch)
		delete(c.seen, name)
	}
	return ch
}

func (c *counter) saw(name, rv string) {
	if ch, ok := c.seen[name]; ok && c.awaitRV[name] == rv {
		close(ch)
		delete(c.seen, name)
	}
}

// OnEvent implements informer.Handler through the per-kind methods below.
func (c *counter) OnEvent(e cache.Event[*corev1.ConfigMap]) {
	informer.HandlerFuncs[*corev1.ConfigMap]{AddFunc: c.OnAdd, UpdateFunc: c.OnUpdate, DeleteFunc: c.OnDelete}.OnEvent(e)
}

func (c *counter) OnAdd(obj *corev1.ConfigMap, _ bool) {
	defer c.changed.Notify()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.view[obj.Name]; ok {
		c.violations = append(c.violations, "add of known "+obj.Name)
	}
	c.view[obj.Name] = obj.ResourceVersion
	c.saw(obj.Name, obj.ResourceVersion)
}

func (c *counter) OnUpdate(old, new *corev1.ConfigMap) {
	defer c.changed.Notify()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view[old.Name] != old.ResourceVersion {
		c.violations = append(c.violations, fmt.Sprintf("update of %s from %s, handler had %q", old.Name, old.ResourceVersion, c.view[old.Name]))
	}
	c.view[new.Name] = new.ResourceVersion
	c.saw(new.Name, new.ResourceVersion)
}

func (c *counter) OnDelete(obj *corev1.ConfigMap, finalStateUnknown bool) {
	defer c.changed.Notify()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.view[obj.Name]; !ok {
		c.violations = append(c.violations, "delete of unknown "+obj.Name)
	}
	delete(c.view, obj.Name)
	if finalStateUnknown {
		c.unknown++
	}
}

// testChurn writes at random to at least 2,000 ConfigMaps from several
// goroutines while the API server is restarted and etcd compacted, then
// checks the informer's cache and a handler's view against a fresh LIST.
func testChurn(t *testing.T, env *testenv.Env, cfg *rest.Config, cs kubernetes.Interface, ns string, wcfg watcher.Options) {
	ctx := e2eContext(t, 4*time.Minute, "churn test "+ns)
	ns = testenv.NewNamespace(t, cs, ns)

	var expired atomic.Int64 // 410s the reflector met
	wcfg.Backoff = watcher.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	reg := prometheus.NewRegistry()
	f := informer.NewFactory(cfg, informer.FactoryOptions{Watch: wcfg, Registerer: reg})
	g := newGate()
	inf, err := informer.OfListerWatcher(f, "configmaps", informer.Scope{Namespace: ns}, func(o watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) {
		lw := watcher.FromClient[*corev1.ConfigMap](cs.CoreV1().ConfigMaps(o.Namespace), watcher.Scope{LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector})
		return gatedLW[*corev1.ConfigMap]{lw: lw, gate: g, expired: &expired}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	handlerReg, err := inf.AddHandler(cnt, informer.HandlerOptions{Name: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	runFactory(t, f)
	if err := f.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	const (
		initial = 2000
		pool    = 2600
		writers = 8
	)
	name := func(i int) string { return fmt.Sprintf("cm-%04d", i) }
	payload := func(r *rand.Rand) map[string]string {
		return map[string]string{"v": fmt.Sprint(r.Uint64())}
	}
	var ops, failed atomic.Int64
	parallel := func(n int, fn func(w int)) {
		var wg sync.WaitGroup
		for w := range n {
			wg.Go(func() { fn(w) })
		}
		wg.Wait()
	}

	// Phase 1: create the initial objects.
	began := time.Now()
	parallel(writers, func(w int) {
		r := rand.New(rand.NewPCG(uint64(w), 1))
		for i := w; i < initial; i += writers {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns}, Data: payload(r)}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Errorf("create %s: %v", cm.Name, err)
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("created %d ConfigMaps in %v", initial, time.Since(began))

	// Phase 2: random creates, updates and deletes, while a disruptor cuts
	// the informer off, restarts the API server, deletes behind the
	// informer's back, compacts etcd and restarts again (so the informer's
	// resourceVersion is gone), three times.
	stopWriting := make(chan struct{})
	// server says whether the API server is up, and when that changes.
	var server struct {
		await.Signal
		up atomic.Bool
	}
	server.up.Store(true)
	setUp := func(up bool) { server.up.Store(up); server.Notify() }
	progress := make(chan struct{}, 1) // a writer finished an op
	var behindBack atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := 0; i < 1500; i++ {
				select {
				case <-stopWriting:
					return
				case <-ctx.Done():
					return
				default:
				}
				n := name(r.IntN(pool))
				var err error
				switch op := r.IntN(10); {
				case op < 3:
					_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Data: payload(r)}, metav1.CreateOptions{})
				case op < 7:
					_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Data: payload(r)}, metav1.UpdateOptions{})
				default:
					err = cs.CoreV1().ConfigMaps(ns).Delete(ctx, n, metav1.DeleteOptions{})
				}
				ops.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
				switch {
				case err == nil, apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
				default:
					// The API server is down: carry on once it is up
					// again (at once if it already is).
					failed.Add(1)
					_ = ctxwait.Until(ctx, server.Changed, func() bool { return server.up.Load() })
				}
			}
		})
	}
	restarts := 0
	for cycle := 1; cycle <= 3; cycle++ {
		for ops.Load() < int64(cycle*500) { // let the writers get ahead
			select {
			case <-progress:
			case <-ctx.Done():
				t.Fatalf("cycle %d: writers stopped at %d ops: %v", cycle, ops.Load(), context.Cause(ctx))
			}
		}
		g.close()
		setUp(false)
		env.StopAPIServer()
		if err := env.StartAPIServer(ctx); err != nil {
			t.Fatalf("start API server: %v", err)
		}
		setUp(true)
		restarts++
		// Deletes the informer cannot see: only a relist will tell it.
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 40})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, item := range list.Items {
			if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, item.Name, metav1.DeleteOptions{}); err == nil {
				behindBack.Add(1)
			}
		}
		setUp(false)
		rev, err := env.CompactAndRestart(ctx)
		if err != nil {
			t.Fatalf("compact and restart: %v", err)
		}
		setUp(true)
		restarts++
		t.Logf("cycle %d: %d ops so far (%d failed while the server was down), compacted at %d", cycle, ops.Load(), failed.Load(), rev)
		before := relists(t, reg)
		g.reopen()
		// The informer's resourceVersion is gone: it must take a new
		// snapshot before the next cycle cuts it off again.
		// The relist hands the handler the deletes it missed, and the
		// writers go on changing things: the handler hears of it.
		await.Until(t, fmt.Sprintf("cycle %d: a relist after the compaction", cycle), cnt.changed.Changed, func() bool {
			return relists(t, reg) > before
		})
	}
	close(stopWriting)
	wg.Wait()
	t.Logf("%d random ops (%d failed), %d API server restarts, %d deletes behind the informer's back", ops.Load(), failed.Load(), restarts, behindBack.Load())

	// Quiescence: one last write marks the end; once the cache has seen it,
	// it has seen everything before it.
	sentinel, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "zz-sentinel", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Lister().WaitFor(ctx, cache.KeyOf(sentinel), sentinel.ResourceVersion); err != nil {
		t.Fatalf("cache never caught up with the last write: %v (informer last error: %v)", err, inf.Status().Source.LastError)
	}
	fresh, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, item := range fresh.Items {
		want[item.Name] = item.ResourceVersion
	}
	got := map[string]string{}
	for _, o := range inf.Lister().List(nil) {
		got[o.Name] = o.ResourceVersion
	}
	if !maps.Equal(got, want) {
		t.Errorf("cache differs from a fresh LIST of %d objects: %s", len(want), diff(got, want))
	}

	select {
	case <-cnt.await(sentinel.Name, sentinel.ResourceVersion):
	case <-ctx.Done():
		t.Fatalf("handler never saw the last write: %v", context.Cause(ctx))
	}
	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	if !maps.Equal(cnt.view, want) {
		t.Errorf("handler's view differs from a fresh LIST: %s", diff(cnt.view, want))
	}
	if len(cnt.violations) > 0 {
		t.Errorf("handler saw %d inconsistent notifications, first: %q", len(cnt.violations), cnt.violations[:min(5, len(cnt.violations))])
	}
	if cnt.unknown == 0 {
		t.Errorf("no delete was seen with FinalStateUnknown although %d objects were deleted behind the informer's back", behindBack.Load())
	}
	if expired.Load() == 0 {
		t.Errorf("the reflector never met a 410 Gone / Expired error")
	}
	select {
	case <-handlerReg.Synced():
	default:
		t.Error("the handler's registration never synced")
	}
	snapshots := relists(t, reg)
	if snapshots < 4 {
		t.Errorf("the informer took %v snapshots; want the initial one and one after each compaction", snapshots)
	}
	t.Logf("final: %d objects; handler saw %d deletes with final state unknown; reflector met %d 410s and took %v snapshots", len(want), cnt.unknown, expired.Load(), snapshots)
	if len(want) < 1000 {
		t.Errorf("only %d objects remain; the churn did not exercise a large cache", len(want))
	}
}

// relists reads the reflector's count of completed snapshots.
func relists(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	v, _ := metricstest.Find(t, reg, "kloop_reflector_events_total", "type", watcher.RelistDone.String())
	return v
}

func diff(got, want map[string]string) string {
	var missing, extra, stale []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case g != v:
			stale = append(stale, fmt.Sprintf("%s@%s(want %s)", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	slices.Sort(stale)
	cut := func(s []string) []string { return s[:min(len(s), 10)] }
	return fmt.Sprintf("%d missing %v, %d extra %v, %d stale %v", len(missing), cut(missing), len(extra), cut(extra), len(stale), cut(stale))
}

// Widget is a custom resource type defined here, with hand-written deep
// copies, to show that any Go type can be informed on through generics.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec"`
}

type WidgetSpec struct {
	Size  int64  `json:"size"`
	Color string `json:"color,omitempty"`
}

type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func (in *Widget) DeepCopyObject() runtime.Object {
	out := new(Widget)
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

func (in *WidgetList) DeepCopyObject() runtime.Object {
	out := new(WidgetList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Widget, len(in.Items))
		for i := range in.Items {
			out.Items[i] = *in.Items[i].DeepCopyObject().(*Widget)
		}
	}
	return out
}

var widgetGV = schema.GroupVersion{Group: "e2e.kloop.dev", Version: "v1"}

func widgetScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(widgetGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, widgetGV)
	return s
}

func testCustomResource(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) {
	ctx := e2eContext(t, 2*time.Minute, "custom resource test")
	ns := "widgets"
	ns = testenv.NewNamespace(t, cs, ns)
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGV.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGV.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgetGV.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size":  {Type: "integer"},
							"color": {Type: "string"},
						}},
					},
				}},
			}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	testwait.CRDServed(t, cfg, crd.Name)

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := widgetGV.WithResource("widgets")
	widgets := dyn.Resource(gvr).Namespace(ns)
	newWidget := func(name string, size int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": widgetGV.String(), "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"size": size, "color": "blue"},
		}}
	}
	first, err := widgets.Create(ctx, newWidget("first", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create widget: %v", err)
	}

	f := informer.NewFactory(cfg, informer.FactoryOptions{Scheme: widgetScheme(t), Registerer: prometheus.NewRegistry()})
	inf, err := informer.OfResource[*Widget](f, gvr, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan string, 100)
	reg, err := inf.AddHandler(informer.HandlerFuncs[*Widget]{
		AddFunc: func(w *Widget, initial bool) {
			events <- fmt.Sprintf("add %s size=%d color=%s initial=%v", w.Name, w.Spec.Size, w.Spec.Color, initial)
		},
		UpdateFunc: func(old, new *Widget) {
			events <- fmt.Sprintf("update %s size=%d>%d", new.Name, old.Spec.Size, new.Spec.Size)
		},
		DeleteFunc: func(obj *Widget, finalStateUnknown bool) {
			events <- fmt.Sprintf("delete %s size=%d unknown=%v", obj.Name, obj.Spec.Size, finalStateUnknown)
		},
	}, informer.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runFactory(t, f)
	if err := reg.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("handler got %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("handler never got %q: %v", want, context.Cause(ctx))
		}
	}
	expect("add first size=1 color=blue initial=true")

	if _, err := widgets.Create(ctx, newWidget("second", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("add second size=2 color=blue initial=false")
	if err := unstructured.SetNestedField(first.Object, int64(10), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	updated, err := widgets.Update(ctx, first, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect("update first size=1>10")
	if err := inf.Lister().WaitFor(ctx, cache.Key{Namespace: ns, Name: "first"}, updated.GetResourceVersion()); err != nil {
		t.Fatal(err)
	}
	if w, ok := inf.Lister().Get(ns, "first"); !ok || w.Spec.Size != 10 || w.ManagedFields != nil {
		t.Fatalf("lister has %+v", w)
	}
	if err := widgets.Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete second size=2 unknown=false")
}

func testMetadataOnly(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) {
	ctx := e2eContext(t, time.Minute, "metadata-only test")
	ns := "metadata-only"
	ns = testenv.NewNamespace(t, cs, ns)
	big := strings.Repeat("x", 4096)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns, Labels: map[string]string{"app": "demo"}},
		Data:       map[string]string{"payload": big},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := informer.NewFactory(cfg, informer.FactoryOptions{Registerer: prometheus.NewRegistry()})
	inf, err := informer.OfResource[*metav1.PartialObjectMetadata](f, configMapsGVR, informer.Scope{Namespace: ns, LabelSelector: "app=demo"})
	if err != nil {
		t.Fatal(err)
	}
	added := make(chan *metav1.PartialObjectMetadata, 10)
	if _, err := inf.AddHandler(informer.HandlerFuncs[*metav1.PartialObjectMetadata]{
		AddFunc: func(o *metav1.PartialObjectMetadata, _ bool) { added <- o },
	}, informer.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	runFactory(t, f)
	if err := f.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	o, ok := inf.Lister().Get(ns, "a")
	if !ok {
		t.Fatal("metadata informer does not have ns/a")
	}
	if o.Labels["app"] != "demo" || o.UID == "" || o.ResourceVersion == "" || o.ManagedFields != nil {
		t.Errorf("cached metadata %+v", o.ObjectMeta)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns, Labels: map[string]string{"app": "demo"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		select {
		case got := <-added:
			if got.Name != want {
				t.Errorf("handler got %s, want %s", got.Name, want)
			}
		case <-ctx.Done():
			t.Fatalf("handler never got %s: %v", want, context.Cause(ctx))
		}
	}
}

// testCachedObjectsMatchTheServer checks that objects that reach the cache
// through a watch (decoded from protobuf by the informer's own path) are
// what the API server returns for them, less managedFields unless kept.
func testCachedObjectsMatchTheServer(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) {
	ctx := e2eContext(t, time.Minute, "cached objects test")
	ns := testenv.NewNamespace(t, cs, "cached-objects")
	type side struct {
		inf   *informer.Informer[*corev1.ConfigMap]
		added chan *corev1.ConfigMap
		mem   informer.Memory
	}
	var sides []side
	for _, mem := range []informer.Memory{{}, {KeepManagedFields: true}, {Encoded: true}} {
		f := informer.NewFactory(cfg, informer.FactoryOptions{Memory: mem, Registerer: prometheus.NewRegistry()})
		inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		added := make(chan *corev1.ConfigMap, 10)
		if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
			AddFunc: func(o *corev1.ConfigMap, _ bool) { added <- o },
		}, informer.HandlerOptions{}); err != nil {
			t.Fatal(err)
		}
		runFactory(t, f)
		if err := f.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		sides = append(sides, side{inf: inf, added: added, mem: mem})
	}
	var want []*corev1.ConfigMap
	for _, name := range []string{"a", "b"} {
		created, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: ns,
				Labels:      map[string]string{"app": "demo", "tier": "front"},
				Annotations: map[string]string{"example.com/note": "for " + name},
			},
			Data:       map[string]string{"name": name, "payload": "some value"},
			BinaryData: map[string][]byte{"bin": {0, 1, 2}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.TypeMeta = metav1.TypeMeta{}
		want = append(want, created)
	}
	for _, s := range sides {
		for _, w := range want {
			select {
			case got := <-s.added:
				w := w.DeepCopy()
				if !s.mem.KeepManagedFields {
					w.ManagedFields = nil
				} else if len(w.ManagedFields) == 0 {
					t.Fatal("the server returned no managedFields; the test cannot tell whether they are kept")
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%+v: handler got\n%#v\nwant\n%#v", s.mem, got, w)
				}
				// What a reader gets from the cache: the same object, or
				// when the cache is encoded an equal one decoded from it
				// (equal as API values: a timestamp may come back in
				// another time zone).
				equal := reflect.DeepEqual
				if s.mem.Encoded {
					equal = equality.Semantic.DeepEqual
				}
				if cached, ok := s.inf.Lister().Get(ns, w.Name); !ok || !equal(cached, w) {
					t.Errorf("%+v: cached\n%#v\nwant\n%#v", s.mem, cached, w)
				}
			case <-ctx.Done():
				t.Fatalf("handler never got %s: %v", w.Name, context.Cause(ctx))
			}
		}
	}
}

// testTransform: a factory informer's transform shapes every object before
// the cache or a handler sees it, from the initial list and from the watch.
func testTransform(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) {
	ctx := e2eContext(t, time.Minute, "transform test")
	ns := testenv.NewNamespace(t, cs, "transform")
	create := func(name string) {
		t.Helper()
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "demo"},
				Annotations: map[string]string{"example.com/note": "long text"}},
			Data: map[string]string{"payload": strings.Repeat("x", 1000)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("listed") // reaches the informer through its initial list

	f := informer.NewFactory(cfg, informer.FactoryOptions{Registerer: prometheus.NewRegistry()})
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	// The transform keeps what this controller reads: names, labels and
	// the keys of Data.
	if err := inf.SetTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		for k := range cm.Data {
			cm.Data[k] = ""
		}
		cm.Annotations = nil
		return cm
	}); err != nil {
		t.Fatal(err)
	}
	if same, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns}); err != nil || same != inf {
		t.Fatalf("the factory handed out another informer (%v)", err)
	} else if err := same.SetTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap { return cm }); !errors.Is(err, informer.ErrTransformSet) {
		t.Fatalf("a second transform on the shared informer = %v, want ErrTransformSet", err)
	}
	added := make(chan *corev1.ConfigMap, 4)
	if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc: func(o *corev1.ConfigMap, _ bool) { added <- o },
	}, informer.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	runFactory(t, f)
	if err := f.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	create("watched") // reaches it through the watch
	check := func(where string, o *corev1.ConfigMap) {
		t.Helper()
		if v, ok := o.Data["payload"]; !ok || v != "" || o.Annotations != nil || o.Labels["app"] != "demo" {
			t.Errorf("%s %s: Data %q, annotations %v, labels %v; want the payload key with an empty value, no annotations, the labels", where, o.Name, o.Data, o.Annotations, o.Labels)
		}
	}
	for range 2 {
		select {
		case o := <-added:
			check("handler", o)
			cached, ok := inf.Lister().Get(ns, o.Name)
			if !ok {
				t.Fatalf("%s not cached", o.Name)
			}
			check("cache", cached)
		case <-ctx.Done():
			t.Fatalf("handler did not get both objects: %v", context.Cause(ctx))
		}
	}
}
