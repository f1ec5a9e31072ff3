package kloop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/conditions"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// prunedCRD serves Foo's Go types in a group of its own whose status
// schema keeps only availableReplicas: the server prunes the conditions
// and observedGeneration a writer sends, as sample-controller's CRD does.
const prunedCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.pruned.kloop.dev
spec:
  group: pruned.kloop.dev
  names: {kind: Foo, listKind: FooList, plural: foos, singular: foo}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              deploymentName: {type: string}
              replicas: {type: integer}
          status:
            type: object
            properties:
              availableReplicas: {type: integer}
`

var prunedGV = schema.GroupVersion{Group: "pruned.kloop.dev", Version: "v1alpha1"}

// startApp runs app until the test ends and checks that Run returns nil.
func startApp(t *testing.T, app *kloop.App) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run after stop = %v, want nil", err)
			}
		case <-time.After(await.Timeout):
			t.Errorf("Run did not return within %v of the stop", await.Timeout)
		}
	})
}

func TestHandle_WriteStatusSkipsAStatusAlreadyThereOrPrunedAfterItsOwnWrite(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	if err := manifest.InstallCRD(ctx, env.Config, []byte(prunedCRD)); err != nil {
		t.Fatal(err)
	}
	testwait.CRDServed(t, env.Config, "foos.pruned.kloop.dev")
	ns := testenv.NewNamespace(t, kubernetes.NewForConfigOrDie(env.Config), "status")
	scheme := kloop.NewScheme(func(s *runtime.Scheme) error {
		s.AddKnownTypes(prunedGV, &v1alpha1.Foo{}, &v1alpha1.FooList{})
		metav1.AddToGroupVersion(s, prunedGV)
		return nil
	})
	app, err := kloop.New(env.Config, kloop.Options{Name: "status-writer", Scheme: scheme, Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: prunedGV.WithResource("foos")})
	startApp(t, app)
	if err := foos.Informer().WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	created, err := foos.Create(ctx, &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f"}})
	if err != nil {
		t.Fatal(err)
	}
	cached, err := foos.Get(ctx, ns, "f") // waits for the create
	if err != nil {
		t.Fatal(err)
	}

	// The status the cache already holds: nothing is written.
	same := cache.Copy(cached)
	if got, wrote, err := foos.WriteStatus(ctx, same); err != nil || wrote || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("WriteStatus of the cached status: wrote %v, rv %s, err %v; want nothing written, rv %s", wrote, got.ResourceVersion, err, created.ResourceVersion)
	}

	// A status with fields the schema prunes: written once ...
	want := cache.Copy(cached)
	want.Status.AvailableReplicas = 1
	conditions.Set(&want.Status.Conditions, want, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Done"})
	stored, wrote, err := foos.WriteStatus(ctx, want)
	if err != nil || !wrote {
		t.Fatalf("first WriteStatus: wrote %v, err %v; want written", wrote, err)
	}
	if stored.Status.AvailableReplicas != 1 || len(stored.Status.Conditions) != 0 {
		t.Fatalf("stored status %+v, want availableReplicas 1 and the conditions pruned", stored.Status)
	}
	cached, err = foos.Get(ctx, ns, "f") // waits for the status write
	if err != nil {
		t.Fatal(err)
	}
	// ... and not again while the Foo is as that write left it.
	again := cache.Copy(cached)
	again.Status = *want.Status.DeepCopy()
	if got, wrote, err := foos.WriteStatus(ctx, again); err != nil || wrote || got.ResourceVersion != stored.ResourceVersion {
		t.Fatalf("WriteStatus of the pruned status again: wrote %v, rv %s, err %v; want nothing written, rv %s", wrote, got.ResourceVersion, err, stored.ResourceVersion)
	}
	if server, err := foos.Resource().Get(ctx, ns, "f"); err != nil || server.ResourceVersion != stored.ResourceVersion {
		t.Fatalf("server's Foo at rv %v (err %v), want still %s", server.ResourceVersion, err, stored.ResourceVersion)
	}

	// Another write changes the Foo: the wanted status is written again,
	// once.
	updated := &await.Signal{}
	if _, err := foos.Informer().AddHandler(informer.HandlerFuncs[*v1alpha1.Foo]{
		UpdateFunc: func(_, _ *v1alpha1.Foo) { updated.Notify() },
	}, informer.HandlerOptions{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	labelled := cache.Copy(cached)
	labelled.Labels = map[string]string{"touched": "yes"}
	changed, err := foos.Update(ctx, labelled)
	if err != nil {
		t.Fatal(err)
	}
	await.Until(t, "the labelled Foo in the handle's cache", updated.Changed, func() bool {
		got, ok := foos.Informer().Lister().Get(ns, "f")
		if ok {
			cached = got
		}
		return ok && got.ResourceVersion == changed.ResourceVersion
	})
	again = cache.Copy(cached)
	again.Status = *want.Status.DeepCopy()
	if _, wrote, err := foos.WriteStatus(ctx, again); err != nil || !wrote {
		t.Fatalf("WriteStatus after another change: wrote %v, err %v; want written", wrote, err)
	}

	// An error names the object.
	gone := cache.Copy(cached)
	gone.Name = "missing"
	if _, wrote, err := foos.WriteStatus(ctx, gone); !apierrors.IsNotFound(err) || wrote || !strings.Contains(err.Error(), "Foo "+ns+"/missing") {
		t.Errorf("WriteStatus of a missing Foo: wrote %v, err %v; want a NotFound naming Foo %s/missing", wrote, err, ns)
	}
}

// A condition stamped by meta.SetStatusCondition carries time.Now's
// nanoseconds; the server stores the second. A status that differs from the
// cached one only below that is the one already stored: not written.
func TestHandle_WriteStatusComparesTimesAtThePrecisionTheServerStores(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	installCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(installCtx, env.Config, foo.CRDYAML); err != nil {
		t.Fatal(err)
	}
	ns := testenv.NewNamespace(t, kubernetes.NewForConfigOrDie(env.Config), "status-time")
	app, err := kloop.New(env.Config, kloop.Options{Name: "status-time", Namespace: ns, Scheme: foo.Scheme(), Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	startApp(t, app)
	if _, err := foos.Create(ctx, &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f"}, Spec: v1alpha1.FooSpec{DeploymentName: "web"}}); err != nil {
		t.Fatal(err)
	}
	cached, err := foos.Get(ctx, ns, "f")
	if err != nil {
		t.Fatal(err)
	}
	want := cache.Copy(cached)
	want.Status.AvailableReplicas = 1
	conditions.Set(&want.Status.Conditions, want, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Done"})
	stored, wrote, err := foos.WriteStatus(ctx, want)
	if err != nil || !wrote {
		t.Fatalf("first WriteStatus: wrote %v, err %v; want written", wrote, err)
	}
	at := stored.Status.Conditions[0].LastTransitionTime.Time
	if at.Nanosecond() != 0 {
		t.Fatalf("the server stored the condition's time as %v, want whole seconds", at)
	}
	cached, err = foos.Get(ctx, ns, "f") // waits for the status write
	if err != nil {
		t.Fatal(err)
	}

	again := cache.Copy(cached)
	again.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(500 * time.Microsecond))
	if got, wrote, err := foos.WriteStatus(ctx, again); err != nil || wrote || got.ResourceVersion != stored.ResourceVersion {
		t.Fatalf("WriteStatus of a time 500µs later: wrote %v, rv %s, err %v; want nothing written, rv %s", wrote, got.ResourceVersion, err, stored.ResourceVersion)
	}
	later := cache.Copy(cached)
	later.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(time.Second))
	if _, wrote, err := foos.WriteStatus(ctx, later); err != nil || !wrote {
		t.Fatalf("WriteStatus of a time a second later: wrote %v, err %v; want written", wrote, err)
	}
}
