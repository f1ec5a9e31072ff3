package oteltest

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/otlp"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// looper is a controller that writes a changing annotation on every
// reconcile of its ConfigMaps, so that each write wakes it again (when its
// own writes are reconciled: by default they are skipped).
type looper struct {
	cms     *kloop.Handle[*corev1.ConfigMap]
	n       atomic.Int64
	changed await.Signal
}

func (l *looper) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	l.changed.Notify()
	cm, err := l.cms.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		return controller.Result{}, err
	}
	cm = cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["loop"] = strconv.FormatInt(l.n.Add(1), 10)
	_, err = l.cms.Update(ctx, cm)
	return controller.Result{}, err
}

// startTracedLooper runs the looping controller in an App configured by
// the OTEL_* environment, as a user's would be.
func startTracedLooper(t *testing.T, name string, opts func(*controller.Options[cache.Key])) (*looper, *prometheus.Registry, string) {
	t.Helper()
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, name)
	reg := prometheus.NewRegistry()
	appOpts := kloop.Options{Name: name, Namespace: ns, Logger: slog.New(slog.DiscardHandler), Registry: reg}
	var err error
	if appOpts.Traces, err = otlp.New(appOpts, ""); err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(env.Config, appOpts)
	if err != nil {
		t.Fatal(err)
	}
	l := &looper{cms: kloop.Objects[*corev1.ConfigMap](app)}
	if _, err := kloop.NewController(app, name, l.Reconcile).For(l.cms).WithOptions(opts).Complete(); err != nil {
		t.Fatal(err)
	}
	await.Run(t, "App.Run", app.Run)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "spin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return l, reg, ns
}

func TestApp_TracesReconcilesTheirCausesAndTheirWritesToAnOTLPReceiver(t *testing.T) {
	r := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	// With the skip on (the default), the event of the looper's write does
	// not run it again: the skip is the span of the write's child.
	_, _, ns := startTracedLooper(t, "traced", func(*controller.Options[cache.Key]) {})
	key := ns + "/spin"

	// The first reconcile names the ConfigMap's creation; its write is
	// its child; the reconcile that write wakes links to the write and is
	// its child too: the loop is one chain.
	var first, write, next span
	await.Until(t, "a reconcile span, its write's span, and the reconcile the write woke", r.got.Changed, func() bool {
		spans := r.all()
		byID := map[string]span{}
		for _, s := range spans {
			byID[s.id] = s
		}
		for _, s := range spans {
			if s.name != "reconcile traced" || s.attrs["kloop.key"] != key || s.attrs["kloop.self_triggered"] != "true" || len(s.links) == 0 {
				continue
			}
			w, ok := byID[s.links[0]]
			if !ok || w.parent == "" {
				continue
			}
			p, ok := byID[w.parent]
			if !ok {
				continue
			}
			first, write, next = p, w, s
			return true
		}
		return false
	})
	if first.name != "reconcile traced" || first.attrs["kloop.controller"] != "traced" || first.attrs["kloop.outcome"] != "success" {
		t.Errorf("the write's parent %+v is not a successful reconcile of the controller", first)
	}
	if !strings.Contains(first.attrs["kloop.causes"], "For ConfigMap "+key+"@") {
		t.Errorf("the reconcile's causes %q do not name the ConfigMap", first.attrs["kloop.causes"])
	}
	if write.name != "update configmaps" || write.attrs["kloop.write.verb"] != "update" || write.attrs["k8s.namespace.name"] != ns ||
		write.attrs["kloop.write.name"] != "spin" || write.attrs["kloop.write.resource_version"] == "" {
		t.Errorf("the write's span is %+v; want update configmaps of %s/spin with its resourceVersion", write, ns)
	}
	rv := write.attrs["kloop.write.resource_version"]
	if want := "For ConfigMap " + key + "@" + rv + " Updated (own)"; !strings.Contains(next.attrs["kloop.causes"], want) {
		t.Errorf("the reconcile the write woke has causes %q, want %q", next.attrs["kloop.causes"], want)
	}
	if next.attrs["kloop.outcome"] != controller.OutcomeSkipped {
		t.Errorf("the reconcile woken only by its own write has outcome %q, want %q", next.attrs["kloop.outcome"], controller.OutcomeSkipped)
	}
	if next.parent != write.id {
		t.Errorf("the self-triggered reconcile's parent is %s, want the write %s: the loop is not one chain", next.parent, write.id)
	}
	if n, err := strconv.Atoi(next.attrs["kloop.causes.total"]); err != nil || n < 1 {
		t.Errorf("kloop.causes.total = %q", next.attrs["kloop.causes.total"])
	}
}

func TestApp_SendsNoTraceWithoutOTELConfiguration(t *testing.T) {
	r := startReceiver(t)
	// The receiver listens at the default OTLP/HTTP path on this port,
	// but nothing says to use it.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	l, reg, _ := startTracedLooper(t, "untraced", func(o *controller.Options[cache.Key]) { o.ReconcileOwnWrites = true }) // a loop, so that there are reconciles to trace
	await.Until(t, "5 reconciles", l.changed.Changed, func() bool { return l.n.Load() >= 5 })
	if spans := r.all(); len(spans) != 0 {
		t.Errorf("the receiver got %d spans from an App without OTEL configuration", len(spans))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kloop_trace_") {
			t.Errorf("metric %s registered without traces on", mf.GetName())
		}
	}
}
