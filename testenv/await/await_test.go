package await_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kloop-dev/kloop/internal/ctxwait"
	"github.com/kloop-dev/kloop/internal/testwait"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }

func TestUntil_ChecksAgainOnEveryNotifyAndReturnsOnceTrue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sig await.Signal
		var n, checks atomic.Int32
		done := make(chan struct{})
		go func() {
			await.Until(t, "n to reach 3", sig.Changed, func() bool { checks.Add(1); return n.Load() >= 3 })
			close(done)
		}()
		for range 3 {
			synctest.Wait()
			n.Add(1)
			sig.Notify()
		}
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Until did not return after the condition held")
		}
		if c := checks.Load(); c != 4 {
			t.Errorf("condition checked %d times, want 4 (once at the start, once per Notify)", c)
		}
	})
}

func TestCtxwaitUntil_ReturnsTheCauseWhenTheConditionNeverHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sig await.Signal
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := ctxwait.Until(ctx, sig.Changed, func() bool { return false })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ctxwait.Until = %v, want the deadline", err)
		}
	})
}

func TestSignal_NotifyWithoutWaitersIsANoOpAndChangedClosesOnTheNextOne(t *testing.T) {
	var sig await.Signal
	sig.Notify()
	ch := sig.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any Notify after it")
	default:
	}
	if sig.Changed() != ch {
		t.Error("two Changed calls without a Notify between them gave different channels")
	}
	sig.Notify()
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by Notify")
	}
}

func TestReceive_ReturnsTheValueSent(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := await.Receive(t, "a value", ch); v != 7 {
		t.Errorf("Receive = %d, want 7", v)
	}
}

func TestObject_SeesTheCurrentStateAndThenChanges(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "await")
	cms := kc.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := await.Object(t, "the existing state", cms, "c", func(c *corev1.ConfigMap) bool { return c.Data["v"] == "1" })
	if got.Name != "c" {
		t.Fatalf("Object returned %q", got.Name)
	}
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		got.Data["v"] = "2"
		if _, err := cms.Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	if v := await.Object(t, "the update", cms, "c", func(c *corev1.ConfigMap) bool { return c.Data["v"] == "2" }).Data["v"]; v != "2" {
		t.Errorf("Object returned v=%q, want 2", v)
	}
	<-changed
}

func TestCRDServed_ReturnsOnlyOnceTheResourcesCanBeCreated(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "await-crd")
	// A group of this run's own (the namespace's random name), so that a
	// second run on the same control plane (-count=2) starts from no CRD.
	gv := schema.GroupVersion{Group: ns + ".await.kloop.dev", Version: "v1"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things." + gv.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gv.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gv.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}},
			}},
		},
	}
	if _, err := apiextensions.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.CRDServed(t, e.Config, crd.Name)
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gv.String(), "kind": "Thing", "metadata": map[string]any{"name": "t"}}}
	if _, err := dynamic.NewForConfigOrDie(e.Config).Resource(gv.WithResource("things")).Namespace(ns).Create(t.Context(), thing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create right after CRDServed: %v", err)
	}
}

func ptrTrue() *bool { b := true; return &b }

func TestExited_ReturnsWhenAProcessEndsAndAtOnceForOneGone(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	reaped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(reaped) }()
	returned := make(chan struct{})
	go func() { testwait.Exited(t, "sleep", pid); close(returned) }()
	select {
	case <-returned:
		t.Fatal("Exited returned while the process ran")
	case <-reaped:
		t.Fatal("sleep 600 ended by itself")
	default:
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	await.Closed(t, "Exited to return after the kill", returned)
	<-reaped
	testwait.Exited(t, "a reaped process", pid) // gone: returns at once
}

func TestRun_StopsFnWhenTheTestEndsAndReportsItsError(t *testing.T) {
	var stopped atomic.Bool
	ft := &fakeTB{TB: t}
	t.Run("inner", func(inner *testing.T) {
		ft.TB = inner
		await.Run(ft, "the loop", func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Store(true)
			return errors.New("boom")
		})
	})
	if !stopped.Load() {
		t.Fatal("fn still runs after the test ended")
	}
	if ft.errors != 1 {
		t.Errorf("%d errors reported, want 1 (fn's error after the stop)", ft.errors)
	}
}

// fakeTB counts Errorf calls instead of failing the test.
type fakeTB struct {
	testing.TB
	errors int
}

func (f *fakeTB) Errorf(string, ...any) { f.errors++ }
func (f *fakeTB) Helper()               {}

// Changes notifies on an event of any of its watches: here a Secret's,
// second of the two watched resources; nothing before it.
func TestChanges_NotifiesOnAnEventOfAnyWatch(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "changes")
	sig := await.Changes(t, kc.CoreV1().ConfigMaps(ns), kc.CoreV1().Secrets(ns))
	changed := sig.Changed()
	select {
	case <-changed:
		t.Fatal("notified before any change")
	default:
	}
	if _, err := kc.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Closed(t, "a notification of the Secret's creation", changed)
}

func TestQuotaEnforced_ReturnsOnlyOnceAPodIsRefused(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "await-quota")
	// This control plane runs no kube-controller-manager: the test makes
	// the service account Pods need and writes the quota's status itself.
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	none := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	quota, err := kc.CoreV1().ResourceQuotas(ns).Create(t.Context(), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: none},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: none, Used: none}
	if _, err := kc.CoreV1().ResourceQuotas(ns).UpdateStatus(t.Context(), quota, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.QuotaEnforced(t, kc, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}},
	}
	if _, err := kc.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: no-pods") {
		t.Fatalf("create right after QuotaEnforced: err = %v, want Forbidden for exceeding quota no-pods", err)
	}
}

func TestLogs_KeepsGroupedAndAddedAttributesFlattened(t *testing.T) {
	logs := await.NewLogs()
	slog.New(logs).With("controller", "c").WithGroup("g").With("a", 1).Info("m", "b", 2, slog.Group("h", "c", true))
	recs := logs.Records()
	if len(recs) != 1 {
		t.Fatalf("kept %d records, want 1", len(recs))
	}
	want := map[string]string{"controller": "c", "g.a": "1", "g.b": "2", "g.h.c": "true"}
	if !maps.Equal(recs[0].Attrs, want) || recs[0].Message != "m" || recs[0].Level != slog.LevelInfo {
		t.Errorf("record = %+v, want message m at Info with %v", recs[0], want)
	}
}

// fatalTB records the first Fatalf message instead of failing the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	if f.msg == "" {
		f.msg = fmt.Sprintf(format, args...)
	}
}
func (f *fatalTB) Helper() {}

func TestLogged_ReturnsTheFirstMatchAndOnTimeoutQuotesTheLatestRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := await.NewLogs()
		log := slog.New(logs)
		go func() {
			log.Info("starting")
			log.Debug(await.ReconciledMessage, "controller", "c", "key", "ns/a")
		}()
		if r := await.Reconciled(t, logs, "c", "ns/a"); r.Attrs["key"] != "ns/a" {
			t.Errorf("Reconciled returned %v", r)
		}
		ft := &fatalTB{TB: t}
		await.Reconciled(ft, logs, "c", "ns/b")
		for _, want := range []string{"waiting for controller c to reconcile ns/b", "the latest of 2 log records", `msg="starting"`, `key="ns/a"`} {
			if !strings.Contains(ft.msg, want) {
				t.Errorf("failure message %q does not contain %q", ft.msg, want)
			}
		}
	})
}

// Two waits in a row for the same key: Reconciled passes at once on the
// reconcile already logged, NextReconcile blocks until a new one.
func TestNextReconcile_WaitsForAReconcileAfterItsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := await.NewLogs()
		log := slog.New(logs)
		log.Debug(await.ReconciledMessage, "controller", "c", "key", "ns/a", "n", 1)
		if r := await.Reconciled(t, logs, "c", "ns/a"); r.Attrs["n"] != "1" {
			t.Fatalf("Reconciled returned %v, want the first reconcile", r)
		}
		if r := await.Reconciled(t, logs, "c", "ns/a"); r.Attrs["n"] != "1" {
			t.Fatalf("a second Reconciled returned %v; it matches any past record, so the first", r)
		}
		next := await.NextReconcile(t, logs, "c", "ns/a")
		got := make(chan await.Record, 1)
		go func() { got <- next() }()
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("NextReconcile returned %v before any new reconcile", r)
		default:
		}
		log.Debug(await.ReconciledMessage, "controller", "c", "key", "ns/b", "n", 2)                    // another key
		log.Debug(await.ReconciledMessage, "controller", "other", "key", "ns/a", "n", 3)                // another controller
		log.Error("Reconcile failed; will retry", "controller", "c", "key", "ns/a", "n", 4, "err", "x") // not reconciled
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("NextReconcile returned %v, which is not a reconcile of c ns/a", r)
		default:
		}
		log.Debug(await.ReconciledMessage, "controller", "c", "key", "ns/a", "n", 5)
		synctest.Wait()
		select {
		case r := <-got:
			if r.Attrs["n"] != "5" {
				t.Errorf("NextReconcile returned %v, want the reconcile logged after it", r)
			}
		default:
			t.Fatal("NextReconcile still waits after a new reconcile of c ns/a")
		}
		// On timeout it says which reconcile it waited for.
		ft := &fatalTB{TB: t}
		await.NextReconcile(ft, logs, "c", "ns/a")()
		if !strings.Contains(ft.msg, "waiting for the next controller c to reconcile ns/a (after log record 5)") {
			t.Errorf("failure message %q does not say what it waited for", ft.msg)
		}
	})
}

func TestGone_ReturnsAtOnceForNoObjectAndOnceAFinalizedOneIsDeleted(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "await-gone")
	cms := kc.CoreV1().ConfigMaps(ns)
	await.Gone(t, "a ConfigMap that never existed", cms, "never")

	cm, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"await.kloop.dev/hold"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(t.Context(), cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleting only marks it: it must still be there when Gone starts.
	held := await.Object(t, "the delete to be marked", cms, "held", func(c *corev1.ConfigMap) bool { return c.DeletionTimestamp != nil })
	done := make(chan struct{})
	go func() {
		defer close(done)
		await.Gone(t, "the held ConfigMap", cms, "held")
	}()
	held.Finalizers = nil
	if _, err := cms.Update(t.Context(), held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Closed(t, "Gone to return", done)
	if _, err := cms.Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Gone: %v, want NotFound", err)
	}
}

func TestCtxwaitObject_SaysWhatItLastSawWhenTheConditionNeverHolds(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "await-last")
	cms := kc.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"v": "seen-value"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := ctxwait.Object(ctx, cms, "c", func(*corev1.ConfigMap) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "seen-value") || !strings.Contains(err.Error(), "c last seen as") {
		t.Errorf("ctxwait.Object error = %v, want the deadline with the object last seen", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = ctxwait.Object(ctx, cms, "missing", func(*corev1.ConfigMap) bool { return true })
	if err == nil || !strings.Contains(err.Error(), "missing was never seen") {
		t.Errorf("ctxwait.Object for a missing object: %v, want it to say it never saw it", err)
	}
}
