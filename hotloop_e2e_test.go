package kloop_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// looper is a controller that writes a changing annotation on every
// reconcile of its ConfigMaps, so that each write wakes it again.
type looper struct {
	cms     *kloop.Handle[*corev1.ConfigMap]
	n       atomic.Int64
	mu      sync.Mutex
	starts  []time.Time
	changed await.Signal
}

func (l *looper) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	l.mu.Lock()
	l.starts = append(l.starts, time.Now())
	l.mu.Unlock()
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

// startLooper runs an App with the looper controller in a namespace of
// its own, with a debug page, and creates the ConfigMap it loops on.
func startLooper(t *testing.T, name string, opts func(*controller.Options[cache.Key])) (*kloop.App, *looper, *await.Logs, *prometheus.Registry, string) {
	t.Helper()
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, name)
	logs := await.NewLogs()
	reg := prometheus.NewRegistry()
	app, err := kloop.New(env.Config, kloop.Options{Name: name, Namespace: ns, Logger: slog.New(logs), Registry: reg, DebugAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	l := &looper{cms: kloop.Objects[*corev1.ConfigMap](app)}
	if _, err := kloop.NewController(app, name, l.Reconcile).For(l.cms).WithOptions(opts).Complete(); err != nil {
		t.Fatal(err)
	}
	runApp(t, app)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "spin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return app, l, logs, reg, ns
}

// By default the looper's own writes do not wake it (see
// TestApp_AReconcileWokenOnlyByItsOwnWriteIsSkipped); a loop through
// another key or another controller still is one. The hot-loop tests turn
// the skip off to make the loop.
func reconcileOwnWrites(o *controller.Options[cache.Key]) { o.ReconcileOwnWrites = true }

func TestApp_AReconcileWokenOnlyByItsOwnWriteIsSkipped(t *testing.T) {
	app, l, logs, reg, ns := startLooper(t, "selfskip", func(*controller.Options[cache.Key]) {})
	key := ns + "/spin"
	skipped := func(what string, not string) string {
		t.Helper()
		r := await.Logged(t, what, logs, func(r await.Record) bool {
			return strings.HasPrefix(r.Message, "Skipped reconcile") && r.Attrs["key"] == key && r.Attrs["causes"] != not
		})
		if c := r.Attrs["causes"]; !strings.HasPrefix(c, "For ConfigMap "+key+"@") || !strings.HasSuffix(c, "Updated (own)") {
			t.Errorf("the skip's causes are %q, want the controller's own update of %s", c, key)
		}
		return r.Attrs["causes"]
	}
	first := skipped("the skip of the reconcile woken by the first write", "")
	if n := l.n.Load(); n != 1 {
		t.Errorf("%d reconciles after the ConfigMap was created, want 1: its own write woke it", n)
	}
	// A foreign change is reconciled; the write it makes is skipped again.
	kc := kubernetes.NewForConfigOrDie(controlPlane.Env(t).Config)
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(t.Context(), "spin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{"touched": "yes"}
	if _, err := kc.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	skipped("the skip of the reconcile woken by the second write", first)
	if n := l.n.Load(); n != 2 {
		t.Errorf("%d reconciles after a foreign update, want 2", n)
	}
	if v := metricstest.Value(t, reg, "kloop_controller_self_triggered_reconciles_total", "controller", "selfskip"); v != 0 {
		t.Errorf("kloop_controller_self_triggered_reconciles_total = %v, want 0: the self-triggered ones were skipped", v)
	}
	if v := metricstest.Value(t, reg, "kloop_controller_skipped_reconciles_total", "controller", "selfskip"); v != 2 {
		t.Errorf("kloop_controller_skipped_reconciles_total = %v, want 2", v)
	}

	testwait.Closed(t, "the debug page's address", app.Debug().AddrReady())
	resp, err := http.Get(app.Debug().URL(debug.SnapshotPath))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Controllers []struct {
			Reconciles struct {
				Skipped int
			}
			RecentReconciles []struct {
				Key, Outcome string
				Causes       []string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Controllers) != 1 || snap.Controllers[0].Reconciles.Skipped != 2 {
		t.Fatalf("debug page controllers %+v, want one with 2 skipped reconciles", snap.Controllers)
	}
	n := 0
	for _, r := range snap.Controllers[0].RecentReconciles {
		if r.Outcome == controller.OutcomeSkipped && r.Key == key && len(r.Causes) == 1 && strings.HasSuffix(r.Causes[0], "Updated (own)") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d skipped reconciles of %s woken by its own update on the debug page, want 2: %+v", n, key, snap.Controllers[0].RecentReconciles)
	}
}

func TestApp_ALoopingControllerIsReportedAsAHotLoop(t *testing.T) {
	start := time.Now()
	app, _, logs, reg, ns := startLooper(t, "looper", reconcileOwnWrites)
	key := ns + "/spin"

	warning := await.Logged(t, "the hot-loop warning", logs, func(r await.Record) bool {
		return strings.HasPrefix(r.Message, "Hot loop") && r.Attrs["key"] == key
	})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the hot loop was reported %v after the ConfigMap was created, want within 30s", took)
	}
	if !strings.Contains(warning.Attrs["causes"], "For ConfigMap "+key+"@") || !strings.Contains(warning.Attrs["causes"], "(own)") {
		t.Errorf("the warning's causes %q do not say what the controller wrote", warning.Attrs["causes"])
	}
	if v := metricstest.Value(t, reg, "kloop_controller_self_triggered_reconciles_total", "controller", "looper"); v < 10 {
		t.Errorf("kloop_controller_self_triggered_reconciles_total = %v, want at least 10", v)
	}

	testwait.Closed(t, "the debug page's address", app.Debug().AddrReady())
	resp, err := http.Get(app.Debug().URL(debug.SnapshotPath))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Controllers []struct {
			Name     string
			HotLoops []struct {
				Key        string
				Reconciles int
				Causes     []string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Controllers) != 1 || len(snap.Controllers[0].HotLoops) != 1 {
		t.Fatalf("debug page controllers %+v, want looper with one hot loop", snap.Controllers)
	}
	if h := snap.Controllers[0].HotLoops[0]; h.Key != key || h.Reconciles < 10 || len(h.Causes) == 0 || !strings.HasSuffix(h.Causes[0], "(own)") {
		t.Errorf("hot loop on the debug page %+v, want %s with at least 10 reconciles woken by its own write", h, key)
	}

	n := 0
	for _, r := range logs.Records() {
		if strings.HasPrefix(r.Message, "Hot loop") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d hot-loop warnings, want one", n)
	}
}

func TestApp_DebounceBoundsTheRateOfALoopingController(t *testing.T) {
	const debounce = 500 * time.Millisecond
	_, l, _, _, _ := startLooper(t, "debounced", func(o *controller.Options[cache.Key]) {
		reconcileOwnWrites(o)
		o.Debounce = debounce
	})
	var starts []time.Time
	await.Until(t, "6 reconciles of the looping ConfigMap", l.changed.Changed, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		starts = slices.Clone(l.starts)
		return len(starts) >= 6
	})
	// Each reconcile is woken by the previous one's write, which comes
	// after that one started: Debounce holds it until the write has been
	// quiet for debounce, so reconciles start at least debounce apart.
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < debounce {
			t.Errorf("reconcile %d started %v after the one before, want at least Debounce (%v)", i+1, gap, debounce)
		}
	}
}
