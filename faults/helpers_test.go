package faults

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
)

// deadline bounds a phase of a test; when it is hit the cause says what was
// being waited for.
func deadline(t *testing.T, d time.Duration, what string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(t.Context(), d, fmt.Errorf("%s: not done within %v", what, d))
	t.Cleanup(cancel)
	return ctx
}

// logger writes to the test log, so that a failure shows what the
// reflectors and controllers did.
func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// serverView is what a fresh LIST of the configmaps in ns returns: name →
// resourceVersion.
func serverView(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("fresh LIST: %v", err)
	}
	m := map[string]string{}
	for _, cm := range l.Items {
		m[cm.Name] = cm.ResourceVersion
	}
	return m
}

func cacheView(inf *informer.Informer[*corev1.ConfigMap]) map[string]string {
	m := map[string]string{}
	for _, cm := range inf.Lister().List(nil) {
		m[cm.Name] = cm.ResourceVersion
	}
	return m
}

func render(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s@%s ", k, m[k])
	}
	return b.String()
}

// observed is a set of facts that goroutines report and a test waits on:
// each change closes and replaces a channel, so waiting needs no polling.
type observed struct {
	mu      sync.Mutex
	changed chan struct{}
	seen    map[string]string // key → latest value
}

func newObserved() *observed {
	return &observed{changed: make(chan struct{}), seen: map[string]string{}}
}

func (o *observed) set(k, v string) {
	o.mu.Lock()
	o.seen[k] = v
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

func (o *observed) del(k string) {
	o.mu.Lock()
	delete(o.seen, k)
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

// mirror is a handler that keeps o equal to what the informer tells it:
// name → resourceVersion.
func (o *observed) mirror() informer.HandlerFuncs[*corev1.ConfigMap] {
	return informer.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc:    func(cm *corev1.ConfigMap, _ bool) { o.set(cm.Name, cm.ResourceVersion) },
		UpdateFunc: func(_, cm *corev1.ConfigMap) { o.set(cm.Name, cm.ResourceVersion) },
		DeleteFunc: func(obj *corev1.ConfigMap, finalStateUnknown bool) { o.del(obj.Name) },
	}
}

func (o *observed) snapshot() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.seen)
}

// waitUntil waits until cond holds on the facts, or ctx ends (then the
// error says what was last seen).
func (o *observed) waitUntil(ctx context.Context, cond func(map[string]string) bool) error {
	for {
		o.mu.Lock()
		ok := cond(o.seen)
		ch := o.changed
		last := render(o.seen)
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w; last seen: %s", context.Cause(ctx), last)
		}
	}
}

// mirrored is a ConfigMap informer with a handler that mirrors its view
// (name → resourceVersion) and a controller whose reconciles record, per
// key, the resourceVersion they read from the cache ("" when the object
// was gone): what the fault tests compare with a fresh LIST.
type mirrored struct {
	inf              *informer.Informer[*corev1.ConfigMap]
	view, reconciled *observed
}

// runMirrored makes the informer of f for ns and the controller called
// name (two workers), runs f and the controller until the test ends and
// waits for the sync until setup ends.
func runMirrored(t *testing.T, setup context.Context, f *informer.Factory, ns, name string, reg prometheus.Registerer) *mirrored {
	t.Helper()
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	m := &mirrored{inf: inf, view: newObserved(), reconciled: newObserved()}
	if _, err := inf.AddHandler(m.view.mirror(), informer.HandlerOptions{Name: "mirror"}); err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		rv := ""
		if cm, ok := inf.Lister().Get(k.Namespace, k.Name); ok {
			rv = cm.ResourceVersion
		}
		m.reconciled.set(k.Name, rv)
		return controller.Result{}, nil
	}), controller.Options[cache.Key]{Name: name, Workers: 2, Registerer: reg, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(controller.For[*corev1.ConfigMap](inf)); err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "factory", f.Start)
	testwait.Run(t, "controller", c.Start)
	if err := f.WaitForSync(setup); err != nil {
		t.Fatal(err)
	}
	return m
}

// caughtUp waits until the handler's view equals want (a fresh LIST),
// fails if that took longer than bound after since (when the fault
// ended, the event named after), and checks that the cache equals want.
func (m *mirrored) caughtUp(ctx context.Context, t *testing.T, want map[string]string, since time.Time, after string, bound time.Duration) {
	t.Helper()
	if err := m.view.waitUntil(ctx, func(got map[string]string) bool { return maps.Equal(got, want) }); err != nil {
		t.Fatalf("the handler's view never matched a fresh LIST %s: %v", render(want), err)
	}
	took := time.Since(since)
	t.Logf("caught up %v after %s (bound %v)", took.Round(time.Millisecond), after, bound)
	if took > bound {
		t.Errorf("caught up %v after %s, want within %v", took, after, bound)
	}
	if got := cacheView(m.inf); !maps.Equal(got, want) {
		t.Errorf("cache %s, fresh LIST %s", render(got), render(want))
	}
}

// createConfigMaps creates cm-0 … cm-(n-1) in ns with data v.
func createConfigMaps(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, n int, v string) {
	t.Helper()
	for i := range n {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": v},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
