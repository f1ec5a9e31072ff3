package kloop_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// stepper reconciles ConfigMaps: when data "do" names a step it has not
// done (annotation "done"), it does it, with its own writes through the
// App's client and, for some steps, a write of another program's (a
// client of its own) in the same pass.
type stepper struct {
	id      string // names its annotation, "done-<id>"
	app     *kloop.App
	cms     *kloop.Handle[*corev1.ConfigMap]
	svcs    *kloop.Handle[*corev1.Service]
	kc      kubernetes.Interface
	mu      sync.Mutex
	calls   [][]controller.Cause
	wrote   map[string]string // step → resourceVersion of its own writes, space-separated
	foreign map[string]string // step → resourceVersion of the other program's write
	acted   map[string]int    // step → how many reconciles there were up to the one that did it
	changed await.Signal
}

func (s *stepper) note(m map[string]string, step, rv string) {
	s.mu.Lock()
	m[step] = strings.TrimSpace(m[step] + " " + rv)
	s.mu.Unlock()
}

func (s *stepper) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	causes, _ := controller.CausesFrom(ctx)
	s.mu.Lock()
	s.calls = append(s.calls, causes)
	call := len(s.calls)
	s.mu.Unlock()
	defer s.changed.Notify()
	cm, err := s.cms.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	do := cm.Data["do"]
	if do == "" || cm.Annotations["done-"+s.id] == do {
		return controller.Result{}, nil
	}
	mark := func() error {
		out, err := s.cms.Patch(ctx, key.Namespace, key.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"done-`+s.id+`":"`+do+`"}}}`), client.PatchOptions{})
		if err == nil {
			s.note(s.wrote, do, out.ResourceVersion)
		}
		return err
	}
	other := func() error {
		out, err := s.kc.CoreV1().ConfigMaps(key.Namespace).Patch(context.Background(), key.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"by-other":"`+do+`"}}}`), metav1.PatchOptions{FieldManager: "other"})
		if err == nil {
			s.note(s.foreign, do, out.ResourceVersion)
		}
		return err
	}
	var steps []func() error
	switch do {
	case "child":
		steps = []func() error{func() error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
			if err := s.app.SetControllerReference(cm, svc); err != nil {
				return err
			}
			out, err := s.svcs.Create(ctx, svc)
			if err == nil {
				s.note(s.wrote, do, out.ResourceVersion)
			}
			return err
		}, mark}
	case "other-after":
		steps = []func() error{mark, other}
	case "other-before":
		steps = []func() error{other, mark}
	case "delete-child":
		steps = []func() error{func() error { return s.svcs.Delete(ctx, key.Namespace, key.Name, metav1.DeleteOptions{}) }, mark}
	default:
		steps = []func() error{mark}
	}
	s.mu.Lock()
	s.acted[do] = call
	s.mu.Unlock()
	for _, step := range steps {
		if err := step(); err != nil {
			return controller.Result{}, err
		}
	}
	return controller.Result{}, nil
}

func (s *stepper) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// awaitCall waits for a reconcile after the first n with a cause that
// matches, and returns how many there are then.
func (s *stepper) awaitCall(t *testing.T, what string, n int, match func(controller.Cause) bool) int {
	t.Helper()
	var total int
	await.Until(t, what, s.changed.Changed, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		total = len(s.calls)
		for _, c := range s.calls[min(n, total):] {
			if slices.ContainsFunc(c, match) {
				return true
			}
		}
		return false
	})
	return total
}

// awaitStep waits until the reconcile that does step has made its own
// writes (and the other program's, if any), and returns how many
// reconciles there were up to that one.
func (s *stepper) awaitStep(t *testing.T, step string, own int, other bool) int {
	t.Helper()
	var n int
	await.Until(t, "the reconcile of step "+step, s.changed.Changed, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n = s.acted[step]
		return len(strings.Fields(s.wrote[step])) >= own && (!other || s.foreign[step] != "")
	})
	return n
}

func startStepper(t *testing.T, kc kubernetes.Interface, ns, name, id string, logs *await.Logs) *stepper {
	t.Helper()
	app, err := kloop.New(controlPlane.Env(t).Config, kloop.Options{Name: name, Namespace: ns, Logger: logsOrQuiet(logs), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s := &stepper{id: id, app: app, kc: kc, wrote: map[string]string{}, foreign: map[string]string{}, acted: map[string]int{},
		cms: kloop.Objects[*corev1.ConfigMap](app), svcs: kloop.Objects[*corev1.Service](app)}
	if _, err := kloop.NewController(app, name, s.Reconcile).For(s.cms).Owns(s.svcs).Complete(); err != nil {
		t.Fatal(err)
	}
	runApp(t, app)
	return s
}

// atOrAfter compares resourceVersions, which the API server makes integers.
func atOrAfter(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && h >= w
}

func logsOrQuiet(logs *await.Logs) *slog.Logger {
	if logs == nil {
		return quiet()
	}
	return slog.New(logs)
}

// setStep has the other program ask the stepper for a step on ConfigMap a.
func setStep(t *testing.T, kc kubernetes.Interface, ns, step string) {
	t.Helper()
	if _, err := kc.CoreV1().ConfigMaps(ns).Patch(t.Context(), "a", types.MergePatchType, []byte(`{"data":{"do":"`+step+`"}}`), metav1.PatchOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
}

func TestApp_SkipsOnlyTheEventsOfItsOwnWritesOnTheRealServer(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "selfskip")
	logs := await.NewLogs()
	s := startStepper(t, kc, ns, "stepper", "stepper", logs)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	isA := func(c controller.Cause) bool { return c.Kind == "ConfigMap" && c.Name == "a" }
	n := s.awaitCall(t, "the reconcile of a's creation", 0, isA)

	// A child the server fills in (a Service gets its cluster IP and
	// defaults) and the annotation: both events are the writes' own, at
	// the resourceVersions the server returned, and skipped.
	setStep(t, kc, ns, "child")
	n = s.awaitStep(t, "child", 2, false)
	s.mu.Lock()
	wrote := strings.Fields(s.wrote["child"])
	s.mu.Unlock()
	if len(wrote) != 2 {
		t.Fatalf("step child wrote %q, want the Service and the annotation", wrote)
	}
	for _, rv := range wrote {
		await.Logged(t, "the skip of the event of the write at "+rv, logs, func(r await.Record) bool {
			return strings.HasPrefix(r.Message, "Skipped reconcile") && strings.Contains(r.Attrs["causes"], "@"+rv+" ")
		})
	}
	if got := s.callCount(); got != n {
		t.Errorf("%d reconciles after step child's own writes were skipped, want %d", got, n)
	}
	svc, err := kc.CoreV1().Services(ns).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP == "" || svc.ResourceVersion != wrote[0] {
		t.Errorf("the Service is stored with cluster IP %q at %s; want one the server allocated, at the write's %s", svc.Spec.ClusterIP, svc.ResourceVersion, wrote[0])
	}

	// Another program writes right after the controller's own write: its
	// change wakes the controller, at its own resourceVersion (never
	// hidden behind the own write's, even if the two events are merged).
	setStep(t, kc, ns, "other-after")
	n = s.awaitStep(t, "other-after", 1, true)
	s.mu.Lock()
	other := s.foreign["other-after"]
	s.mu.Unlock()
	n = s.awaitCall(t, "a reconcile woken by the other program's write at "+other, n, func(c controller.Cause) bool {
		return isA(c) && c.ResourceVersion == other && !c.Own
	})

	// Another program writes just before the controller's own write (a
	// patch, with no precondition): reconciled again, whether the two
	// events come one by one or merged into the own write's.
	setStep(t, kc, ns, "other-before")
	n = s.awaitStep(t, "other-before", 1, true)
	s.mu.Lock()
	other, own := s.foreign["other-before"], s.wrote["other-before"]
	s.mu.Unlock()
	n = s.awaitCall(t, "a reconcile after the other program's write at "+other+" and the own one at "+own, n, func(c controller.Cause) bool {
		return isA(c) && (c.ResourceVersion == other || c.ResourceVersion == own)
	})

	// Deleting the child: its delete is never skipped.
	setStep(t, kc, ns, "delete-child")
	n = s.awaitStep(t, "delete-child", 1, false)
	s.awaitCall(t, "a reconcile woken by the delete of the Service", n, func(c controller.Cause) bool {
		return c.Source == "Owns" && c.Kind == "Service" && c.Change == cache.Deleted && !c.Own
	})
}

func TestApp_AnotherReplicasWritesAreNotSkipped(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "replica")
	// Two processes of one program: the same name, so the same field
	// manager; each its own client and controller.
	one := startStepper(t, kc, ns, "twin", "one", nil)
	two := startStepper(t, kc, ns, "twin", "two", nil)
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"do": "mark"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	isA := func(c controller.Cause) bool { return c.Kind == "ConfigMap" && c.Name == "a" }
	// Both mark the step done; each one's write is the other's foreign
	// change, so each is woken by the other's write (not marked own),
	// while its own write's event is skipped.
	one.awaitCall(t, "replica one's reconcile of a", 0, isA)
	two.awaitCall(t, "replica two's reconcile of a", 0, isA)
	for _, p := range []struct {
		name      string
		me, other *stepper
	}{{"one", one, two}, {"two", two, one}} {
		var rv string
		await.Until(t, "replica "+p.name+"'s peer's write", p.other.changed.Changed, func() bool {
			p.other.mu.Lock()
			defer p.other.mu.Unlock()
			rv = p.other.wrote["mark"]
			return rv != ""
		})
		// Woken by it, or by a later change its event was merged into
		// (the replica's own write right after it, say).
		p.me.awaitCall(t, "replica "+p.name+" woken by its peer's write at "+rv, 0, func(c controller.Cause) bool {
			return isA(c) && atOrAfter(c.ResourceVersion, rv)
		})
		p.me.mu.Lock()
		for _, call := range p.me.calls {
			for _, c := range call {
				if c.ResourceVersion == rv && c.Own {
					t.Errorf("replica %s marks its peer's write at %s as its own: %v", p.name, rv, c)
				}
			}
		}
		p.me.mu.Unlock()
	}
}
