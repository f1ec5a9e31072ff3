package foo_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// causeLog keeps the causes of every reconcile of a controller, for a test
// to wait on.
type causeLog struct {
	mu      sync.Mutex
	causes  []controller.Cause
	changed await.Signal
}

func (l *causeLog) add(cs []controller.Cause) {
	l.mu.Lock()
	l.causes = append(l.causes, cs...)
	l.mu.Unlock()
	l.changed.Notify()
}

// await waits until some reconcile had a cause that match accepts, and
// returns it.
func (l *causeLog) await(t *testing.T, what string, match func(controller.Cause) bool) controller.Cause {
	t.Helper()
	var found controller.Cause
	await.Until(t, what, l.changed.Changed, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.IndexFunc(l.causes, match)
		if i >= 0 {
			found = l.causes[i]
		}
		return i >= 0
	})
	return found
}

func (l *causeLog) all() []controller.Cause {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.causes)
}

// The Foo controller's reconciles say why they ran: the test's change of a
// Foo's replicas at its new resourceVersion, kube-controller-manager's
// changes of the owned Deployment, and the controller's own status writes,
// marked as its own.
func TestFooController_ReconcileCausesNameTheChangeThatWokeIt(t *testing.T) {
	e := controlPlane.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(ctx, e.Config, foo.CRDYAML); err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "causes")
	c, err := client.New(e.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}

	logs := await.NewLogs()
	app, err := kloop.New(e.Config, kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), Namespace: ns,
		Logger: slog.New(logs), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	r := &foo.Reconciler{
		Foos:        kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource}),
		Deployments: kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")}).WithTransform(foo.LeanDeployment),
		Recorder:    app.Recorder(),
		Logger:      app.Logger(),
	}
	seen := &causeLog{}
	if _, err := kloop.NewController(app, foo.ControllerName, func(ctx context.Context, key cache.Key) (controller.Result, error) {
		causes, _ := controller.CausesFrom(ctx)
		seen.add(causes)
		return r.Reconcile(ctx, key)
	}).For(r.Foos).Owns(r.Deployments).WithOptions(func(o *controller.Options[cache.Key]) {
		// The test looks at the causes of a reconcile woken by the
		// controller's own status write, which by default is skipped.
		o.ReconcileOwnWrites = true
	}).Complete(); err != nil {
		t.Fatal(err)
	}
	await.Run(t, "the Foo controller's App", app.Run)

	created, err := foos.Create(ctx, &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       v1alpha1.FooSpec{DeploymentName: "web", Replicas: ptr.To[int32](1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	isFoo := func(x controller.Cause) bool {
		return x.Source == "For" && x.Kind == "Foo" && x.Namespace == ns && x.Name == "web"
	}
	seen.await(t, "a reconcile caused by the Foo's creation", func(x controller.Cause) bool {
		return isFoo(x) && x.ResourceVersion == created.ResourceVersion && x.Change == cache.Added && !x.Own
	})

	// The test changes the replicas: the reconcile names that update, at
	// the resourceVersion the update returned, as not the controller's.
	patched, err := foos.Patch(ctx, ns, "web", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), client.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen.await(t, "a reconcile caused by the change of replicas at "+patched.ResourceVersion, func(x controller.Cause) bool {
		return isFoo(x) && x.ResourceVersion == patched.ResourceVersion && x.Change == cache.Updated && !x.Own
	})

	// kube-controller-manager's deployment controller updates the
	// Deployment's status: the reconcile names the Deployment, not as the
	// controller's own write.
	seen.await(t, "a reconcile caused by kube-controller-manager's change of the Deployment", func(x controller.Cause) bool {
		return x.Source == "Owns" && x.Kind == "Deployment" && x.Namespace == ns && x.Name == "web" &&
			x.Change == cache.Updated && !x.Own && x.ResourceVersion != ""
	})

	// The controller writes the Foo's status; the event of that write
	// wakes it again, and is marked as its own.
	own := seen.await(t, "a reconcile caused by the controller's own status write", func(x controller.Cause) bool {
		return isFoo(x) && x.Change == cache.Updated && x.Own
	})
	written, err := foos.Get(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if written.Status.Conditions == nil {
		t.Errorf("the Foo has no status, but a reconcile was caused by the controller's own write at %s", own.ResourceVersion)
	}
	for _, x := range seen.all() {
		if x.Own && (x.ResourceVersion == created.ResourceVersion || x.ResourceVersion == patched.ResourceVersion) {
			t.Errorf("cause %v marks the test's own write as the controller's", x)
		}
	}

	// The reconcile's log line carries them too: its debug line, or its
	// error line when that reconcile failed (a Conflict with
	// kube-controller-manager's write of the Deployment, retried).
	line := fmt.Sprintf("For Foo %s/web@%s Updated (own)", ns, own.ResourceVersion)
	rec := await.Logged(t, "a reconcile's line with the cause "+line, logs, func(r await.Record) bool {
		return strings.Contains(r.Attrs["causes"], line)
	})
	t.Logf("the reconcile woken by its own status write: %s", rec)
}
