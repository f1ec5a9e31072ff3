package kloop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// bulkConfigMaps is how many ConfigMaps the honest-reads tests put behind
// a handle: enough that their informer syncs well after one holding a
// single object.
const bulkConfigMaps = 500

var bulk = labels.SelectorFromSet(labels.Set{"bulk": "yes"})

// createBulk creates n ConfigMaps labelled bulk=yes in ns, four at a time.
func createBulk(t *testing.T, kc kubernetes.Interface, ns string, n int) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%04d", i), Labels: map[string]string{"bulk": "yes"}}}
				if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// firstValue returns the first value sent on ch, failing t after
// await.Timeout.
func firstValue[V any](t *testing.T, what string, ch <-chan V) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(await.Timeout):
		t.Fatalf("waiting for %s: not within %v", what, await.Timeout)
	}
	panic("unreachable")
}

// countOrError is what a test reconcile read: how many objects, or the
// read's error.
type countOrError struct {
	n   int
	err error
}

// reportFirst sends the first read's result on ch and drops the rest.
func reportFirst(ch chan<- countOrError, n int, err error) {
	select {
	case ch <- countOrError{n, err}:
	default:
	}
}

func newHonestApp(t *testing.T, cfg *rest.Config, ns, name string) *kloop.App {
	t.Helper()
	app, err := kloop.New(cfg, kloop.Options{Name: name, Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// The bug this guards against: a controller For one Secret read 500
// ConfigMaps through a handle that is not one of its sources, and its first
// reconcile listed none of them, without an error, because its workers
// started once the Secrets had synced and the ConfigMaps had not.
func TestController_FirstReconcileSeesEveryObjectOfAHandleThatIsNotItsSource(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "honest")
	createBulk(t, kc, ns, bulkConfigMaps)
	if _, err := kc.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for run := range 3 { // each a fresh App, as the bug showed in 3 of 3
		t.Run(fmt.Sprint("app-", run), func(t *testing.T) {
			app := newHonestApp(t, env.Config, ns, "honest-first")
			cms := kloop.Objects[*corev1.ConfigMap](app)
			secrets := kloop.Objects[*corev1.Secret](app)
			first := make(chan countOrError, 1)
			_, err := kloop.NewController(app, "first-read", func(ctx context.Context, _ cache.Key) (controller.Result, error) {
				list, err := cms.List(ctx, ns, bulk)
				reportFirst(first, len(list), err)
				return controller.Result{}, err
			}).For(secrets).Complete()
			if err != nil {
				t.Fatal(err)
			}
			startApp(t, app)
			got := firstValue(t, "the first reconcile", first)
			if got.err != nil || got.n != bulkConfigMaps {
				t.Fatalf("the first reconcile listed %d ConfigMaps (err %v), want all %d", got.n, got.err, bulkConfigMaps)
			}
		})
	}
}

// A handle made after Run (here inside the first reconcile) has an
// informer that starts then: its first read waits for that informer's
// sync instead of answering from an empty cache.
func TestHandle_MadeAfterRunWaitsForItsSyncOnItsFirstRead(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "honest-late")
	createBulk(t, kc, ns, bulkConfigMaps)
	if _, err := kc.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := newHonestApp(t, env.Config, ns, "honest-late")
	secrets := kloop.Objects[*corev1.Secret](app)
	first := make(chan countOrError, 1)
	var once sync.Once
	_, err := kloop.NewController(app, "late-handle", func(ctx context.Context, _ cache.Key) (controller.Result, error) {
		once.Do(func() {
			// Its own selector: a new informer, not one the App holds.
			late := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{LabelSelector: "bulk=yes"})
			list, err := late.List(ctx, ns, nil)
			reportFirst(first, len(list), err)
		})
		return controller.Result{}, nil
	}).For(secrets).Complete()
	if err != nil {
		t.Fatal(err)
	}
	startApp(t, app)
	got := firstValue(t, "the first read of the late handle", first)
	if got.err != nil || got.n != bulkConfigMaps {
		t.Fatalf("the late handle's first List found %d ConfigMaps (err %v), want all %d", got.n, got.err, bulkConfigMaps)
	}
}

// A controller whose only source is a Watches (MapTo) waits for the
// App's other informers as a For controller does.
func TestKeyedController_WithAWatchesSourceFirstReadsAFullCache(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "honest-watches")
	createBulk(t, kc, ns, bulkConfigMaps)
	if _, err := kc.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := newHonestApp(t, env.Config, ns, "honest-watches")
	cms := kloop.Objects[*corev1.ConfigMap](app)
	secrets := kloop.Objects[*corev1.Secret](app)
	first := make(chan countOrError, 1)
	_, err := kloop.NewKeyedController(app, "per-namespace", func(ctx context.Context, namespace string) (controller.Result, error) {
		// The raw Lister, which does not wait: honest here because the
		// controller started only once every informer of the App synced.
		n := len(cms.Informer().Lister().ListInNamespace(namespace, bulk))
		reportFirst(first, n, nil)
		return controller.Result{}, nil
	}).Watches(kloop.MapTo(secrets, func(s *corev1.Secret) []string { return []string{s.Namespace} })).Complete()
	if err != nil {
		t.Fatal(err)
	}
	startApp(t, app)
	got := firstValue(t, "the first reconcile", first)
	if got.n != bulkConfigMaps {
		t.Fatalf("the first reconcile's Lister held %d ConfigMaps, want all %d", got.n, bulkConfigMaps)
	}
}

// A read whose informer the API server refuses is an error that names the
// informer and the refusal, at once: never an empty answer.
func TestHandle_ReadOfACacheThatCannotSyncIsAnErrorNamingTheInformer(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "honest-refused")
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "kloop-test-nobody"} // no rights
	app := newHonestApp(t, cfg, ns, "honest-refused")
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("configmaps")})
	startApp(t, app)
	ctx, cancel := context.WithTimeout(t.Context(), await.Timeout)
	defer cancel()
	list, err := cms.List(ctx, ns, nil)
	if err == nil {
		t.Fatalf("List of a refused cache = %d objects and no error, want an error", len(list))
	}
	var se *informer.SyncError
	if !apierrors.IsForbidden(err) || !errors.As(err, &se) || !strings.Contains(err.Error(), "configmaps") {
		t.Fatalf("List of a refused cache: %v; want a forbidden *informer.SyncError naming the configmaps informer", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("List of a refused cache returned only when its context ended: %v", err)
	}
	if _, err := cms.Get(ctx, ns, "any"); apierrors.IsNotFound(err) || !apierrors.IsForbidden(err) {
		t.Fatalf("Get of a refused cache: %v; want forbidden, not NotFound", err)
	}
}

// CatchUp makes a read at least as fresh as a resourceVersion of another
// kind's event: here a ConfigMaps informer is held behind (its transform
// blocks on one object), so it must wait, then see the object and miss
// the one deleted before; a quiet informer, whose resourceVersion is older
// but which lacks nothing, passes at once.
func TestHandle_CatchUpWaitsForAnInformerHeldBehindTheEvent(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "catchup")
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	app := newHonestApp(t, env.Config, ns, "catchup")
	cms := kloop.Objects[*corev1.ConfigMap](app).WithTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		if cm.Name == "held" {
			<-release
		}
		return cm
	})
	secrets := kloop.Objects[*corev1.Secret](app)
	services := kloop.Objects[*corev1.Service](app) // nothing changes them
	startApp(t, app)
	t.Cleanup(unhold) // runs before the App's stop, which waits for the informer
	ctx := t.Context()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, ns, "gone"); err != nil { // the App's write: the cache has it
		t.Fatal(err)
	}
	// Written by someone else, so that no read-your-writes wait covers it.
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CoreV1().ConfigMaps(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	event, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "event"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := event.ResourceVersion

	// The Services informer is behind rv (nothing moved it since its list)
	// but lacks nothing: it passes at once, without waiting for a bookmark
	// (about a minute away).
	if services.Informer().Lister().ResourceVersion() == rv {
		t.Fatalf("the quiet informer is at %s already; the test needs it behind", rv)
	}
	quick, cancelQuick := context.WithTimeout(ctx, 5*time.Second)
	defer cancelQuick()
	if err := services.CatchUp(quick, ns, rv); err != nil {
		t.Fatalf("CatchUp of a quiet informer: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := cms.CatchUp(short, ns, rv); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CatchUp of the held informer to %s = %v; want it to wait until its context ended", rv, err)
	}
	if _, err := cms.Get(ctx, ns, "held"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get(held) while held = %v; want NotFound (the informer is behind)", err)
	}
	if err := secrets.CatchUp(ctx, ns, rv); err != nil {
		t.Fatalf("CatchUp of the event's own informer: %v", err)
	}

	unhold()
	if err := cms.CatchUp(ctx, ns, rv); err != nil {
		t.Fatalf("CatchUp once released: %v", err)
	}
	if _, err := cms.Get(ctx, ns, "held"); err != nil {
		t.Fatalf("Get(held) after CatchUp: %v", err)
	}
	if _, err := cms.Get(ctx, ns, "gone"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get(gone) after CatchUp = %v; want NotFound: it was deleted before the event", err)
	}
}

// App.Ready says when the controllers have their starting state: a change
// made after it reaches a reconcile as a change (Replay false), never
// folded into the initial list.
func TestApp_ReadyClosesOnceTheControllersRunAndLaterChangesArriveAsChanges(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "ready")
	if _, err := kc.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := newHonestApp(t, env.Config, ns, "ready")
	secrets := kloop.Objects[*corev1.Secret](app)
	changes := make(chan controller.Cause, 16)
	_, err := kloop.NewController(app, "ready", func(ctx context.Context, _ cache.Key) (controller.Result, error) {
		causes, _ := controller.CausesFrom(ctx)
		for _, c := range causes {
			if c.Change == cache.Updated && !c.Replay {
				changes <- c
			}
		}
		return controller.Result{}, nil
	}).For(secrets).Complete()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-app.Ready():
		t.Fatal("Ready closed before Run")
	default:
	}
	startApp(t, app)
	await.Closed(t, "the App's controllers to run", app.Ready())
	patch := []byte(`{"metadata":{"labels":{"changed":"yes"}}}`)
	updated, err := kc.CoreV1().Secrets(ns).Patch(t.Context(), "watched", "application/merge-patch+json", patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := firstValue(t, "a reconcile for the change made after Ready", changes)
	if c.Name != "watched" || c.ResourceVersion != updated.ResourceVersion {
		t.Fatalf("the reconcile's change = %v, want the patch's at %s", c, updated.ResourceVersion)
	}
}

// A read of a resource the API server does not serve fails when its wait
// ends, naming the resource, and is not a NotFound, which a reconcile
// would take for "the object is gone".
func TestHandle_ReadOfAResourceNotServedIsAnErrorButNotNotFound(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "honest-gone")
	app := newHonestApp(t, env.Config, ns, "honest-gone")
	gone := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("configmapz")})
	startApp(t, app)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := gone.Get(ctx, ns, "any"); err == nil || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "configmapz") {
		t.Fatalf("Get of a resource not served = %v; want an error naming configmapz that is not a NotFound", err)
	}
	list, err := gone.List(ctx, ns, nil)
	if err == nil || apierrors.IsNotFound(err) {
		t.Fatalf("List of a resource not served = %d objects, %v; want an error that is not a NotFound", len(list), err)
	}
}
