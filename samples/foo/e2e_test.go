package foo_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/watcher"
)

// harness is one namespace of the shared control plane with the Foo CRD,
// a podsim node and a Foo controller of its own.
type harness struct {
	t    *testing.T
	env  *testenv.Env
	kc   kubernetes.Interface
	foos *client.Resource[*v1alpha1.Foo]
	ns   string
	logs *await.Buffer
	// changes is notified on every change of the namespace's Foos,
	// Deployments, Pods and Events, as the informers of an App of the
	// harness's own see them (they relist after a watch ends, as when the
	// Foo CRD changes).
	changes *await.Signal
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWithCRD(t, foo.CRDYAML)
}

// newHarnessWithCRD is newHarness with the Foo CRD in crd installed.
func newHarnessWithCRD(t *testing.T, crd []byte) *harness {
	t.Helper()
	e := controlPlane.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(ctx, e.Config, crd); err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(e.Config)
	c, err := client.New(e.Config, client.Options{Scheme: foo.Scheme(), DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, env: e, kc: kc, foos: foos, ns: testenv.NewNamespace(t, kc, "foo"), logs: &await.Buffer{}, changes: &await.Signal{}}
	h.observe()
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.run("podsim", func(ctx context.Context) error {
		return podsim.Run(ctx, e.Config, podsim.Options{
			NodeName: "node-" + h.ns, Namespace: h.ns, Logger: log.With("component", "podsim"), Registry: prometheus.NewRegistry(),
		})
	})
	h.run("foo controller", func(ctx context.Context) error {
		reg := prometheus.NewRegistry()
		return foo.Run(ctx, e.Config, kloop.Options{Namespace: h.ns, Logger: log, Registry: reg})
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", h.logs)
		}
	})
	return h
}

// run runs fn until the test ends and checks that it returns nil once
// stopped.
func (h *harness) run(what string, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("%s returned %v after a stop, want nil", what, err)
			}
		case <-time.After(60 * time.Second):
			h.t.Errorf("%s did not return within 60s of the stop", what)
		}
	})
}

// observe runs the App whose informers notify h.changes.
func (h *harness) observe() {
	h.t.Helper()
	app, err := kloop.New(h.env.Config, kloop.Options{Name: "observer", Scheme: foo.Scheme(), Namespace: h.ns,
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		h.t.Fatal(err)
	}
	notifyOn(h.t, kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource}), h.changes)
	notifyOn(h.t, kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: appsv1.SchemeGroupVersion.WithResource("deployments")}), h.changes)
	notifyOn(h.t, kloop.Objects[*corev1.Pod](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("pods")}), h.changes)
	notifyOn(h.t, kloop.Objects[*corev1.Event](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("events")}), h.changes)
	await.Run(h.t, "the harness's observer App", app.Run)
}

// notifyOn notifies sig of every add, update and delete h's informer
// delivers.
func notifyOn[T watcher.Object](t *testing.T, h *kloop.Handle[T], sig *await.Signal) {
	t.Helper()
	if h.Err() != nil {
		t.Fatal(h.Err())
	}
	if _, err := h.Informer().AddHandler(informer.HandlerFuncs[T]{
		AddFunc:    func(T, bool) { sig.Notify() },
		UpdateFunc: func(T, T) { sig.Notify() },
		DeleteFunc: func(T, bool) { sig.Notify() },
	}, informer.HandlerOptions{Name: "harness"}); err != nil {
		t.Fatal(err)
	}
}

// until waits until cond holds, checking it at once and again after every
// change in the namespace (h.changes) and every line the controllers log.
// It fails the test with what and the last state cond described if cond
// does not hold within timeout, and at once with cond's error.
func (h *harness) until(timeout time.Duration, what string, cond func(ctx context.Context) (ok bool, state string, err error)) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), timeout)
	defer cancel()
	var last string
	for {
		changed, logged := h.changes.Changed(), h.logs.Changed()
		ok, state, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			h.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if state != "" {
			last = state
		}
		select {
		case <-changed:
		case <-logged:
		case <-ctx.Done():
			h.t.Fatalf("waiting for %s: not within %v (%v); last seen: %s", what, timeout, context.Cause(ctx), last)
		}
	}
}

func (h *harness) createFoo(f *v1alpha1.Foo) *v1alpha1.Foo {
	h.t.Helper()
	f = f.DeepCopy()
	f.Namespace = h.ns
	got, err := h.foos.Create(h.t.Context(), f)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func newFoo(name, deployment string, replicas *int32) *v1alpha1.Foo {
	return &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.FooSpec{DeploymentName: deployment, Replicas: replicas},
	}
}

func (h *harness) deployment(ctx context.Context, name string) (*appsv1.Deployment, error) {
	return h.kc.AppsV1().Deployments(h.ns).Get(ctx, name, metav1.GetOptions{})
}

// waitDeployment waits until the Deployment exists and returns it.
func (h *harness) waitDeployment(name string) *appsv1.Deployment {
	h.t.Helper()
	var d *appsv1.Deployment
	h.until(60*time.Second, "Deployment "+name+" created", func(ctx context.Context) (bool, string, error) {
		var err error
		d, err = h.deployment(ctx, name)
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		return err == nil, "", err
	})
	return d
}

// waitAvailable waits until the Foo's status reports n available replicas,
// its Deployment asks for n, and exactly n of the Deployment's pods exist,
// all Running and Ready on the harness's node.
func (h *harness) waitAvailable(fooName, deployment string, n int32) {
	h.t.Helper()
	h.until(90*time.Second, fmt.Sprintf("Foo %s with %d available replicas", fooName, n), func(ctx context.Context) (bool, string, error) {
		f, err := h.foos.Get(ctx, h.ns, fooName)
		if err != nil {
			return false, "", err
		}
		d, err := h.deployment(ctx, deployment)
		if apierrors.IsNotFound(err) {
			return false, "no Deployment", nil
		}
		if err != nil {
			return false, "", err
		}
		pods, err := h.kc.CoreV1().Pods(h.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx,controller=" + fooName})
		if err != nil {
			return false, "", err
		}
		running := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if podsim.Running(p) && p.Spec.NodeName == "node-"+h.ns && p.DeletionTimestamp == nil {
				running++
			}
		}
		state := fmt.Sprintf("Foo status.availableReplicas=%d; Deployment replicas=%d available=%d; %d pods, %d running",
			f.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 0), d.Status.AvailableReplicas, len(pods.Items), running)
		return f.Status.AvailableReplicas == n && ptr.Deref(d.Spec.Replicas, 0) == n &&
			len(pods.Items) == int(n) && running == int(n), state, nil
	})
}

// occurrences is how many times the controller recorded ev: its series'
// count (the recorder writes events.k8s.io/v1, which core/v1 readers see
// as a series, with count left empty), the core/v1 count of a server
// without events.k8s.io/v1, or 1.
func occurrences(ev corev1.Event) int32 {
	switch {
	case ev.Series != nil:
		return ev.Series.Count
	case ev.Count > 0:
		return ev.Count
	}
	return 1
}

// events returns the Events about the Foo with the given reason.
func (h *harness) events(ctx context.Context, fooName, reason string) ([]corev1.Event, error) {
	list, err := h.kc.CoreV1().Events(h.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Foo", "involvedObject.name": fooName, "reason": reason,
	}.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (h *harness) scaleFoo(name string, replicas int32) {
	h.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := h.foos.Patch(h.t.Context(), h.ns, name, types.MergePatchType, []byte(patch), client.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func TestFoo_ExampleFooGetsAnOwnedDeploymentWhosePodsBecomeAvailableAndFollowSpecReplicas(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	example, err := manifest.Decode[*v1alpha1.Foo](foo.Scheme(), foo.ExampleFooYAML)
	if err != nil {
		t.Fatal(err)
	}
	created := h.createFoo(example)

	d := h.waitDeployment("example-foo")
	ref := metav1.GetControllerOf(d)
	if ref == nil || ref.UID != created.UID || ref.Kind != "Foo" || ref.Name != "example-foo" ||
		ref.APIVersion != "samplecontroller.k8s.io/v1alpha1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("Deployment's controller reference %+v, want the Foo %s (uid %s), blocking owner deletion", ref, created.Name, created.UID)
	}
	wantLabels := map[string]string{"app": "nginx", "controller": "example-foo"}
	if fmt.Sprint(d.Spec.Selector.MatchLabels) != fmt.Sprint(wantLabels) || fmt.Sprint(d.Spec.Template.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("selector %v and pod labels %v, want %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels, wantLabels)
	}
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "nginx" || cs[0].Image != foo.NginxImage {
		t.Errorf("containers %+v, want one nginx running %s", cs, foo.NginxImage)
	}
	if r := ptr.Deref(d.Spec.Replicas, 0); r != 1 {
		t.Errorf("Deployment replicas %d, want 1", r)
	}
	// Written by server-side apply from the start: foo-controller owns its
	// fields by Apply, none by Update (issue 38).
	for _, mf := range d.ManagedFields {
		if mf.Manager == foo.ControllerName && mf.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("foo-controller owns fields of the Deployment by %s, want by Apply only: %s", mf.Operation, mf.FieldsV1.Raw)
		}
	}
	if !slices.ContainsFunc(d.ManagedFields, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == foo.ControllerName && mf.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Errorf("managedFields %+v: want foo-controller's Apply", d.ManagedFields)
	}
	h.waitAvailable("example-foo", "example-foo", 1)
	// Its status too: foo-controller applies it through /status.
	f, err := h.foos.Get(ctx, h.ns, "example-foo")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(f.ManagedFields, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == foo.ControllerName && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "status"
	}) {
		t.Errorf("the Foo's managedFields %+v: want foo-controller's Apply of the status", f.ManagedFields)
	}

	h.until(30*time.Second, "Normal Synced event on the Foo", func(ctx context.Context) (bool, string, error) {
		evs, err := h.events(ctx, "example-foo", foo.SuccessSynced)
		if err != nil || len(evs) == 0 {
			return false, "no event", err
		}
		ev := evs[0]
		return ev.Type == corev1.EventTypeNormal && ev.Message == foo.MessageResourceSynced && ev.ReportingController == foo.ControllerName,
			fmt.Sprintf("%s %q from %s", ev.Type, ev.Message, ev.ReportingController), nil
	})

	h.scaleFoo("example-foo", 3)
	h.waitAvailable("example-foo", "example-foo", 3)
	// Scaling down needs pods deleted gracefully, which podsim finishes.
	h.scaleFoo("example-foo", 2)
	h.waitAvailable("example-foo", "example-foo", 2)

	// Replica drift made by someone else is undone. (A patch: an update
	// could conflict with the deployment controller's status writes.)
	d, err = h.kc.AppsV1().Deployments(h.ns).Patch(ctx, "example-foo", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.until(60*time.Second, "Deployment replicas set back to the Foo's 2", func(ctx context.Context) (bool, string, error) {
		d, err := h.deployment(ctx, "example-foo")
		if err != nil {
			return false, "", err
		}
		return ptr.Deref(d.Spec.Replicas, 0) == 2, fmt.Sprintf("replicas %d", ptr.Deref(d.Spec.Replicas, 0)), nil
	})

	// An owned Deployment deleted by hand is made again.
	if err := h.kc.AppsV1().Deployments(h.ns).Delete(ctx, "example-foo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until(60*time.Second, "deleted Deployment recreated", func(ctx context.Context) (bool, string, error) {
		nd, err := h.deployment(ctx, "example-foo")
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		if err != nil {
			return false, "", err
		}
		return nd.UID != d.UID && metav1.IsControlledBy(nd, created), fmt.Sprintf("uid %s", nd.UID), nil
	})
	h.waitAvailable("example-foo", "example-foo", 2)
}

func TestFoo_RefusesADeploymentItDoesNotOwnWithAWarningEventAndLeavesItAlone(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	labels := map[string]string{"app": "someone-else"}
	taken, err := h.kc.AppsV1().Deployments(h.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "httpd"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Its pods available first, so that a Foo wrongly taking it over would
	// show available replicas.
	h.until(90*time.Second, "unowned Deployment available", func(ctx context.Context) (bool, string, error) {
		d, err := h.deployment(ctx, "taken")
		if err != nil {
			return false, "", err
		}
		return d.Status.AvailableReplicas == 1, fmt.Sprintf("available %d", d.Status.AvailableReplicas), nil
	})

	h.createFoo(newFoo("thief", "taken", ptr.To[int32](3)))
	wantMsg := `Resource "taken" already exists and is not managed by Foo`
	// The sync fails and is retried with back-off; the recorder folds the
	// repeated warnings into one Event whose count grows.
	h.until(60*time.Second, "repeated Warning ErrResourceExists event on the Foo", func(ctx context.Context) (bool, string, error) {
		evs, err := h.events(ctx, "thief", foo.ErrResourceExists)
		if err != nil || len(evs) == 0 {
			return false, "no event", err
		}
		ev := evs[0]
		return ev.Type == corev1.EventTypeWarning && ev.Message == wantMsg && occurrences(ev) >= 2,
			fmt.Sprintf("%d events; first: %s %q count %d", len(evs), ev.Type, ev.Message, occurrences(ev)), nil
	})

	d, err := h.deployment(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.OwnerReferences) != 0 || ptr.Deref(d.Spec.Replicas, 0) != 1 || d.Generation != taken.Generation {
		t.Errorf("unowned Deployment changed: owners %v, replicas %d, generation %d (was %d)",
			d.OwnerReferences, ptr.Deref(d.Spec.Replicas, 0), d.Generation, taken.Generation)
	}
	f, err := h.foos.Get(ctx, h.ns, "thief")
	if err != nil {
		t.Fatal(err)
	}
	if f.Status.AvailableReplicas != 0 {
		t.Errorf("Foo reports %d available replicas of a Deployment it does not own", f.Status.AvailableReplicas)
	}
	if evs, err := h.events(ctx, "thief", foo.SuccessSynced); err != nil || len(evs) != 0 {
		t.Errorf("Synced events %v (err %v), want none", evs, err)
	}
	if !strings.Contains(h.logs.String(), `err="Resource \"taken\" already exists and is not managed by Foo"`) {
		t.Error("the refusal is not in the logs")
	}
}

func TestFoo_DeletingTheFooGarbageCollectsItsDeploymentAndPods(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.createFoo(newFoo("doomed", "doomed-deploy", ptr.To[int32](2)))
	h.waitAvailable("doomed", "doomed-deploy", 2)

	if err := h.foos.Delete(ctx, h.ns, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until(90*time.Second, "Deployment and pods garbage-collected", func(ctx context.Context) (bool, string, error) {
		_, err := h.deployment(ctx, "doomed-deploy")
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		pods, lerr := h.kc.CoreV1().Pods(h.ns).List(ctx, metav1.ListOptions{LabelSelector: "controller=doomed"})
		if lerr != nil {
			return false, "", lerr
		}
		return apierrors.IsNotFound(err) && len(pods.Items) == 0,
			fmt.Sprintf("deployment found: %v; %d pods", err == nil, len(pods.Items)), nil
	})
}

func TestFoo_MissingDeploymentNameIsLoggedOnceAndNotRetried(t *testing.T) {
	h := newHarness(t)
	h.createFoo(newFoo("nameless", "", ptr.To[int32](1)))
	key := "key=" + h.ns + "/nameless"
	h.until(30*time.Second, "terminal error logged for the Foo without deploymentName", func(context.Context) (bool, string, error) {
		return strings.Contains(h.logs.String(), "spec.deploymentName is empty"), "not logged", nil
	})
	// A Foo created after it is synced; had the first been retried, its
	// back-off (5 ms, 10 ms, …) would have logged it again by then.
	h.createFoo(newFoo("marker", "marker", ptr.To[int32](1)))
	h.waitAvailable("marker", "marker", 1)

	var lines []string
	for l := range strings.Lines(h.logs.String()) {
		if strings.Contains(l, key+" ") && strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "not retrying") || !strings.Contains(lines[0], foo.ErrNoDeploymentName.Error()) {
		t.Errorf("error lines for the Foo without deploymentName:\n%s\nwant exactly one terminal error saying %q", strings.Join(lines, ""), foo.ErrNoDeploymentName)
	}
	deps, err := h.kc.AppsV1().Deployments(h.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 1 {
		t.Errorf("%d Deployments in the namespace, want only the marker's", len(deps.Items))
	}
}

func TestFoo_AFooBeingDeletedInTheForegroundDoesNotGetItsDeploymentBack(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.createFoo(newFoo("leaving", "leaving-deploy", ptr.To[int32](1)))
	h.waitAvailable("leaving", "leaving-deploy", 1)

	// Foreground deletion keeps the Foo, marked for deletion, until the
	// garbage collector has deleted the Deployment; the delete of the
	// Deployment brings the Foo back to the controller meanwhile.
	if err := h.foos.Delete(ctx, h.ns, "leaving", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	h.until(90*time.Second, "Foo and Deployment gone", func(ctx context.Context) (bool, string, error) {
		_, ferr := h.foos.Get(ctx, h.ns, "leaving")
		if ferr != nil && !apierrors.IsNotFound(ferr) {
			return false, "", ferr
		}
		_, derr := h.deployment(ctx, "leaving-deploy")
		if derr != nil && !apierrors.IsNotFound(derr) {
			return false, "", derr
		}
		return apierrors.IsNotFound(ferr) && apierrors.IsNotFound(derr),
			fmt.Sprintf("Foo found: %v; Deployment found: %v", ferr == nil, derr == nil), nil
	})
	// Once a Foo created after this one was gone has its Deployment, the
	// controller's cache has seen the delete (one watch, in order): a later
	// sync finds no Foo.
	h.createFoo(newFoo("marker", "marker", ptr.To[int32](1)))
	h.waitDeployment("marker")

	created := 0
	for l := range strings.Lines(h.logs.String()) {
		if strings.Contains(l, `msg="Created Deployment"`) && strings.Contains(l, " name=leaving-deploy") {
			created++
		}
	}
	if created != 1 {
		t.Errorf("Deployment leaving-deploy created %d times, want once: a Foo being deleted got a new Deployment", created)
	}
}

// The Foo CRD is shared by every test of the package: this one leaves it
// as newHarness installs it, with the status subresource.
func TestFoo_StatusKeepsFollowingWhenThePlainCRDGainsTheStatusSubresource(t *testing.T) {
	plain, err := os.ReadFile("artifacts/examples/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWithCRD(t, plain)
	h.createFoo(newFoo("upgraded", "upgraded", ptr.To[int32](1)))
	h.waitAvailable("upgraded", "upgraded", 1) // written by updates of the whole Foo

	// sample-controller's README step: apply crd-status-subresource.yaml.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(ctx, h.env.Config, foo.CRDYAML); err != nil {
		t.Fatal(err)
	}
	// From now on an update of the whole Foo leaves its status as it was:
	// the API server serves the status subresource once the CRD that has
	// it is established. (Discovery follows; the controller finds out from
	// an update that kept the old status, or from discovery.)
	ext := apiextensions.NewForConfigOrDie(h.env.Config)
	await.Object(t, "the Foo CRD established with the status subresource", ext.ApiextensionsV1().CustomResourceDefinitions(), "foos."+v1alpha1.GroupName,
		func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			for _, v := range crd.Spec.Versions {
				if v.Name == v1alpha1.SchemeGroupVersion.Version && (v.Subresources == nil || v.Subresources.Status == nil) {
					return false
				}
			}
			return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			})
		})
	h.scaleFoo("upgraded", 2)
	h.waitAvailable("upgraded", "upgraded", 2)
}

// loggedSynced counts the Synced events the controller recorded for the
// Foo, from the recorder's log line of each (written when Event is called,
// before the recorder writes the Event).
func (h *harness) loggedSynced(name string) int {
	n := 0
	for l := range strings.Lines(h.logs.String()) {
		if strings.Contains(l, "msg=event ") && strings.Contains(l, "reason="+foo.SuccessSynced+" ") &&
			strings.Contains(l, "namespace="+h.ns+" ") && strings.Contains(l, "name="+name+"\n") {
			n++
		}
	}
	return n
}

// waitSyncedWritten waits until the API server holds every Synced event
// the controller recorded for the Foo, folded into one Event whose count
// is their number, and returns that Event.
func (h *harness) waitSyncedWritten(name string) corev1.Event {
	h.t.Helper()
	var ev corev1.Event
	sel := fields.Set{"involvedObject.kind": "Foo", "involvedObject.name": name, "reason": foo.SuccessSynced}.String()
	what := fmt.Sprintf("the Synced Event of Foo %s to count every Synced the controller recorded", name)
	await.Watched(h.t, what, h.kc.CoreV1().Events(h.ns), metav1.ListOptions{FieldSelector: sel}, func(ctx context.Context) (bool, error) {
		evs, err := h.events(ctx, name, foo.SuccessSynced)
		if err != nil || len(evs) != 1 {
			return false, err
		}
		ev = evs[0]
		return int(occurrences(ev)) == h.loggedSynced(name), nil
	})
	return ev
}

// waitSync waits for the controller's debug line of a sync of the Foo that
// saw resourceVersion rv, and returns the line.
func (h *harness) waitSync(name, rv string) string {
	h.t.Helper()
	var line string
	await.Until(h.t, fmt.Sprintf("a sync of Foo %s at resourceVersion %s", name, rv), h.logs.Changed, func() bool {
		for l := range strings.Lines(h.logs.String()) {
			if strings.Contains(l, `msg="Foo synced" `) && strings.Contains(l, " key="+h.ns+"/"+name+" ") && strings.Contains(l, " rv="+rv+" ") {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

// sample-controller records Synced on every sync; kloop's Foo controller
// only on a sync that created, repaired or deleted a Deployment, so one
// that finds everything in place writes nothing, not even an Event patch,
// and one that only writes the status writes just that.
func TestFoo_RecordsSyncedOnlyWhenASyncChangedSomething(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.createFoo(newFoo("quiet", "quiet", ptr.To[int32](1)))
	h.waitAvailable("quiet", "quiet", 1)
	h.waitReady("quiet", metav1.ConditionTrue, foo.ReasonDeploymentAvailable)
	before := h.waitSyncedWritten("quiet")
	if occurrences(before) < 1 || before.Type != corev1.EventTypeNormal || before.Message != foo.MessageResourceSynced {
		t.Fatalf("Synced Event after the Deployment was created: %s %q count %d, want Normal %q", before.Type, before.Message, occurrences(before), foo.MessageResourceSynced)
	}
	// The status went from 0 to 1 available replicas after the create:
	// written, but not Synced again.
	if occurrences(before) != 1 {
		t.Errorf("Synced count %d once the Foo is available, want 1 (the create; status writes record none)", occurrences(before))
	}

	// An annotation nobody acts on: the Foo is synced again, and nothing
	// is to be done.
	touched, err := h.foos.Patch(ctx, h.ns, "quiet", types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/touched":"yes"}}}`), client.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if line := h.waitSync("quiet", touched.ResourceVersion); !strings.Contains(line, " changed=false") {
		t.Errorf("the sync after an unrelated annotation changed something:\n%s", line)
	}
	if n := h.loggedSynced("quiet"); n != int(occurrences(before)) {
		t.Errorf("%d Synced events recorded after a sync that changed nothing, want still %d", n, occurrences(before))
	}
	evs, err := h.events(ctx, "quiet", foo.SuccessSynced)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || occurrences(evs[0]) != occurrences(before) || evs[0].ResourceVersion != before.ResourceVersion {
		var got []string
		for _, ev := range evs {
			got = append(got, fmt.Sprintf("count %d at resourceVersion %s", occurrences(ev), ev.ResourceVersion))
		}
		t.Errorf("Synced Events after a sync that changed nothing: %v, want only count %d at resourceVersion %s", got, occurrences(before), before.ResourceVersion)
	}

	// A real change is Synced again.
	h.scaleFoo("quiet", 2)
	h.waitAvailable("quiet", "quiet", 2)
	if after := h.waitSyncedWritten("quiet"); occurrences(after) <= occurrences(before) {
		t.Errorf("Synced count %d after scaling the Foo, want more than %d", occurrences(after), occurrences(before))
	}
}
