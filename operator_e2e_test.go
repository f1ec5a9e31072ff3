package kloop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

func TestHandle_DeleteControlledByPropagatesSoAJobsPodsAreCollected(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "jobs")
	app, err := kloop.New(env.Config, kloop.Options{Name: "job-pruner", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps})
	jobs := kloop.Objects[*batchv1.Job](app, kloop.ObjectsOptions{Resource: batchv1.SchemeGroupVersion.WithResource("jobs")})
	startApp(t, app)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}})
	if err != nil {
		t.Fatal(err)
	}
	owner, err = cms.Get(ctx, ns, "owner") // as a cache holds it: no TypeMeta
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
			}},
		},
	}
	if err := app.SetControllerReference(owner, job); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	controlled, err := jobs.ListControlledBy(ctx, owner) // waits for the create
	if err != nil || len(controlled) != 1 || controlled[0].Name != "work" {
		t.Fatalf("ListControlledBy = %d jobs, %v; want the Job work", len(controlled), err)
	}
	pods := metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=work"}
	await.Watched(t, "the Job's two Pods", kc.CoreV1().Pods(ns), pods, func(ctx context.Context) (bool, error) {
		l, err := kc.CoreV1().Pods(ns).List(ctx, pods)
		return err == nil && len(l.Items) == 2, err
	})

	if n, err := jobs.DeleteControlledBy(ctx, owner); err != nil || n != 1 {
		t.Fatalf("DeleteControlledBy = %d, %v; want the Job deleted", n, err)
	}
	// A Job deleted without a propagation policy orphans its Pods; in the
	// background the garbage collector deletes them.
	await.Watched(t, "the Job's Pods to be collected", kc.CoreV1().Pods(ns), pods, func(ctx context.Context) (bool, error) {
		l, err := kc.CoreV1().Pods(ns).List(ctx, pods)
		return err == nil && len(l.Items) == 0, err
	})
	if left, err := jobs.ListControlledBy(ctx, owner); err != nil || len(left) != 0 {
		t.Errorf("ListControlledBy after the delete = %d jobs, %v; want none", len(left), err)
	}
}

func TestHandle_ByIndexWaitsForTheAppsOwnWritesInTheNamespace(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "index")
	app, err := kloop.New(env.Config, kloop.Options{Name: "indexer", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps})
	if err := cms.AddIndex("team", byTeam[*corev1.ConfigMap]); err != nil {
		t.Fatal(err)
	}
	startApp(t, app)
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i), Labels: map[string]string{"team": "blue"}}}
		if _, err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		// Each create is seen at once, with no wait in the test.
		got, err := cms.ByIndex(ctx, ns, "team", "blue")
		if err != nil || len(got) != i+1 {
			t.Fatalf("ByIndex after create %d = %d objects, %v; want %d", i, len(got), err, i+1)
		}
	}
	if err := cms.Delete(ctx, ns, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cms.ByIndex(ctx, "", "team", "blue"); err != nil || slices.ContainsFunc(got, func(cm *corev1.ConfigMap) bool { return cm.Namespace == ns && cm.Name == "cm-0" }) {
		t.Errorf("ByIndex in all namespaces after a delete = %v, %v; want cm-0 gone", keysOf(got), err)
	}
}

// finalizerName is the tests' finalizer.
const finalizerName = "kloop.dev/test-cleanup"

func TestHandle_FinalizeAddsTheFinalizerBeforeApplyAndRemovesItOnlyAfterACleanupSucceeds(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "finalize")
	logs := &await.Buffer{}
	app, err := kloop.New(env.Config, kloop.Options{Name: "finalizer", Namespace: ns, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps})
	var (
		mu                 sync.Mutex
		applies, cleanups  int
		appliedWithout     bool
		failCleanup        = true
		applied, cleanedUp = make(chan struct{}, 100), make(chan struct{}, 100)
	)
	apply := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		applies++
		appliedWithout = appliedWithout || !slices.Contains(cm.Finalizers, finalizerName)
		applied <- struct{}{}
		return controller.Result{}, nil
	}
	cleanup := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		cleanups++
		cleanedUp <- struct{}{}
		if failCleanup {
			failCleanup = false
			return controller.Result{}, errors.New("the bucket is still in use")
		}
		return controller.Result{}, nil
	}
	rec := func(ctx context.Context, key cache.Key) (controller.Result, error) {
		cm, err := cms.Get(ctx, key.Namespace, key.Name)
		if apierrors.IsNotFound(err) {
			return controller.Result{}, nil
		}
		if err != nil {
			return controller.Result{}, err
		}
		return cms.Finalize(ctx, cm, finalizerName, apply, cleanup)
	}
	if _, err := kloop.NewController(app, "finalizer", rec).For(cms).Complete(); err != nil {
		t.Fatal(err)
	}
	startApp(t, app)
	ctx := t.Context()
	// Another controller's finalizer is there first: ours is appended.
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Finalizers: []string{"example.com/other"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Receive(t, "apply", applied)
	got := await.Object(t, "the finalizer on the ConfigMap", kc.CoreV1().ConfigMaps(ns), "bucket", func(cm *corev1.ConfigMap) bool {
		return slices.Contains(cm.Finalizers, finalizerName)
	})
	if want := []string{"example.com/other", finalizerName}; !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers %v, want %v", got.Finalizers, want)
	}

	if err := kc.CoreV1().ConfigMaps(ns).Delete(ctx, "bucket", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first cleanup fails: a Warning event says so, and the retry
	// succeeds.
	testwait.Receive(t, "the first cleanup", cleanedUp)
	testwait.Receive(t, "the second cleanup", cleanedUp)
	warnings := metav1.ListOptions{FieldSelector: "reason=" + kloop.ReasonFinalizerFailed}
	await.Watched(t, "a FinalizerFailed event", kc.CoreV1().Events(ns), warnings, func(ctx context.Context) (bool, error) {
		l, err := kc.CoreV1().Events(ns).List(ctx, warnings)
		if err != nil || len(l.Items) == 0 {
			return false, err
		}
		ev := l.Items[0]
		if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Name != "bucket" || !strings.Contains(ev.Message, finalizerName) || !strings.Contains(ev.Message, "the bucket is still in use") {
			t.Errorf("event %s %s about %s: %q; want a Warning about bucket naming the finalizer and the error", ev.Type, ev.Reason, ev.InvolvedObject.Name, ev.Message)
		}
		return true, nil
	})
	// The other finalizer is left, and holds the ConfigMap.
	got = await.Object(t, "our finalizer removed", kc.CoreV1().ConfigMaps(ns), "bucket", func(cm *corev1.ConfigMap) bool {
		return !slices.Contains(cm.Finalizers, finalizerName)
	})
	if !slices.Equal(got.Finalizers, []string{"example.com/other"}) {
		t.Errorf("finalizers after the cleanup %v, want only example.com/other", got.Finalizers)
	}
	mu.Lock()
	if appliedWithout || applies != 1 || cleanups != 2 {
		t.Errorf("apply ran %d times (once without the finalizer: %v), cleanup %d times; want apply once, with the finalizer, and cleanup twice", applies, appliedWithout, cleanups)
	}
	mu.Unlock()

	// The lines Finalize logs are the reconcile's.
	var added map[string]any
	for _, l := range bytes.Split([]byte(logs.String()), []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(l, &rec) == nil && rec["msg"] == "Added finalizer" {
			added = rec
		}
	}
	if added == nil || added["controller"] != "finalizer" || added["name"] != "bucket" || added["finalizer"] != finalizerName || added["reconcileID"] == nil {
		t.Errorf("Added finalizer log line %v, want one with controller, name, finalizer and reconcileID", added)
	}
}

func TestHandle_FinalizeWorksOnAClusterScopedKindAndRefusesAStaleObject(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	app, err := kloop.New(env.Config, kloop.Options{Name: "cluster-finalizer", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	roles := kloop.Objects[*rbacv1.ClusterRole](app, kloop.ObjectsOptions{Resource: rbacv1.SchemeGroupVersion.WithResource("clusterroles"), ClusterScoped: true})
	startApp(t, app)
	name := "kloop-finalize-cluster-scoped"
	created, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	calls := []string{}
	apply := func(_ context.Context, _ *rbacv1.ClusterRole) (controller.Result, error) {
		calls = append(calls, "apply")
		return controller.Result{}, nil
	}
	cleanup := func(_ context.Context, _ *rbacv1.ClusterRole) (controller.Result, error) {
		calls = append(calls, "cleanup")
		return controller.Result{}, nil
	}
	step := func() {
		t.Helper()
		role, err := roles.Get(ctx, "", name) // waits for the App's own patches
		if err != nil {
			t.Fatal(err)
		}
		if _, err := roles.Finalize(ctx, role, finalizerName, apply, cleanup); err != nil {
			t.Fatalf("Finalize after %v: %v", calls, err)
		}
	}
	step() // adds the finalizer
	// A stale object (an older resourceVersion) changes nothing.
	if _, err := roles.Finalize(ctx, created, "kloop.dev/other", apply, cleanup); err == nil || !apierrors.IsConflict(err) {
		t.Errorf("Finalize of a stale object = %v, want a Conflict", err)
	}
	step() // applies
	if err := roles.Delete(ctx, "", name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	step() // cleans up and removes the finalizer
	if !slices.Equal(calls, []string{"apply", "cleanup"}) {
		t.Errorf("calls %v, want [apply cleanup]", calls)
	}
	if _, err := roles.Get(ctx, "", name); !apierrors.IsNotFound(err) {
		t.Errorf("Get after the finalizer's removal = %v, want NotFound: the API server deletes it", err)
	}
	if _, err := roles.Finalize(ctx, created, "no-domain", apply, cleanup); err == nil || !strings.Contains(err.Error(), "domain-qualified") {
		t.Errorf("Finalize with an unqualified name = %v, want an error saying to qualify it", err)
	}
}
