package kloopfake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/kloopfake"
	"github.com/kloop-dev/kloop/samples/cronjob"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
)

const ns = "default"

// env is an App on a Server with a handle per kind the tests use, its
// informers started and synced.
type env struct {
	srv         *kloopfake.Server
	app         *kloop.App
	configMaps  *kloop.Handle[*corev1.ConfigMap]
	deployments *kloop.Handle[*appsv1.Deployment]
	cronJobs    *kloop.Handle[*batch.CronJob]
}

func newEnv(t *testing.T, opts kloopfake.Options) *env {
	t.Helper()
	opts.Scheme = cronjob.Scheme()
	srv, err := kloopfake.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "test", Scheme: opts.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		srv:         srv,
		app:         app,
		configMaps:  kloop.Objects[*corev1.ConfigMap](app),
		deployments: kloop.Objects[*appsv1.Deployment](app),
		cronJobs:    kloop.Objects[*batch.CronJob](app),
	}
	stop, err := kloopfake.Start(t.Context(), app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return e
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"}}
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1"}}},
			},
		},
	}
}

func cronJob(name string) *batch.CronJob {
	return &batch.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: batch.CronJobSpec{Schedule: "@hourly"}}
}

func rv(t *testing.T, obj metav1.Object) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("%s: resourceVersion %q: %v", obj.GetName(), obj.GetResourceVersion(), err)
	}
	return n
}

func TestServer_CreateFillsMetadataAndTheCacheSeesIt(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	made, err := e.configMaps.Create(ctx, configMap("a"))
	if err != nil {
		t.Fatal(err)
	}
	if made.UID == "" || made.CreationTimestamp.IsZero() || made.Generation != 1 || rv(t, made) == 0 {
		t.Errorf("created %+v: want a uid, a creationTimestamp, generation 1 and a resourceVersion", made.ObjectMeta)
	}
	got, err := e.configMaps.Get(ctx, ns, "a") // the cache, once it holds the write
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != made.ResourceVersion || got.Data["k"] != "v" {
		t.Errorf("cached %s %v, want resourceVersion %s and the data written", got.ResourceVersion, got.Data, made.ResourceVersion)
	}
	gen, err := e.configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gen-"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(gen.Name, "gen-") || len(gen.Name) != len("gen-")+5 {
		t.Errorf("generateName gen- made name %q", gen.Name)
	}
	list, err := e.configMaps.List(ctx, ns, labels.Everything())
	if err != nil || len(list) != 2 {
		t.Errorf("List = %d objects, %v; want 2", len(list), err)
	}
}

func TestServer_CreateOfAnExistingNameIsAlreadyExists(t *testing.T) {
	e := newEnv(t, kloopfake.Options{Objects: []runtime.Object{configMap("a")}})
	_, err := e.configMaps.Create(t.Context(), configMap("a"))
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create of an existing name: %v, want AlreadyExists", err)
	}
	if _, err := e.configMaps.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}); !apierrors.IsInvalid(err) {
		t.Errorf("Create without a name: %v, want Invalid", err)
	}
}

func TestServer_AMissingObjectIsNotFound(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	missing := deployment("missing")
	missing.ResourceVersion = "1"
	for what, err := range map[string]error{
		"cached Get": func() error { _, err := e.deployments.Get(ctx, ns, "missing"); return err }(),
		"server Get": func() error { _, err := e.deployments.Resource().Get(ctx, ns, "missing"); return err }(),
		"Update":     func() error { _, err := e.deployments.Update(ctx, missing); return err }(),
		"UpdateStatus": func() error {
			_, err := e.deployments.UpdateStatus(ctx, missing)
			return err
		}(),
		"Patch": func() error {
			_, err := e.deployments.Patch(ctx, ns, "missing", types.MergePatchType, []byte(`{}`), client.PatchOptions{})
			return err
		}(),
		"Delete": e.deployments.Delete(ctx, ns, "missing", metav1.DeleteOptions{}),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s of a missing object: %v, want NotFound", what, err)
		}
	}
}

func TestServer_EveryChangeBumpsTheResourceVersionAndAStaleOneConflicts(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	v1, err := e.configMaps.Create(ctx, configMap("a"))
	if err != nil {
		t.Fatal(err)
	}
	changed := v1.DeepCopy()
	changed.Data["k"] = "w"
	v2, err := e.configMaps.Update(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	if rv(t, v2) <= rv(t, v1) {
		t.Errorf("update: resourceVersion %s after %s, want it bumped", v2.ResourceVersion, v1.ResourceVersion)
	}
	stale := v1.DeepCopy()
	stale.Data["k"] = "x"
	if _, err := e.configMaps.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update at stale resourceVersion %s: %v, want Conflict", v1.ResourceVersion, err)
	}
	same, err := e.configMaps.Update(ctx, v2.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != v2.ResourceVersion {
		t.Errorf("an update that changes nothing moved resourceVersion %s to %s; the API server writes nothing then", v2.ResourceVersion, same.ResourceVersion)
	}
	unconditional := v2.DeepCopy()
	unconditional.ResourceVersion = ""
	unconditional.Data["k"] = "y"
	if _, err := e.configMaps.Update(ctx, unconditional); err != nil {
		t.Errorf("an update without resourceVersion is unconditional: %v", err)
	}
	if got, _ := e.configMaps.Get(ctx, ns, "a"); got.Data["k"] != "y" {
		t.Errorf("cache has %v after the last update, want k=y", got.Data)
	}
}

func TestServer_StatusSubresource(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	withStatus := deployment("web")
	withStatus.Status.Replicas = 5
	made, err := e.deployments.Create(ctx, withStatus)
	if err != nil {
		t.Fatal(err)
	}
	if made.Status.Replicas != 0 {
		t.Errorf("create stored status %+v; with a status subresource a create resets it", made.Status)
	}

	// Update: the spec changes and generation with it; the status does not.
	up := made.DeepCopy()
	up.Spec.Replicas = ptr.To[int32](3)
	up.Status.Replicas = 7
	updated, err := e.deployments.Update(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if *updated.Spec.Replicas != 3 || updated.Status.Replicas != 0 || updated.Generation != 2 {
		t.Errorf("Update: spec.replicas %d, status.replicas %d, generation %d; want 3, 0 (ignored), 2", *updated.Spec.Replicas, updated.Status.Replicas, updated.Generation)
	}

	// UpdateStatus: the status changes; the spec and generation do not.
	st := updated.DeepCopy()
	st.Status.Replicas = 3
	st.Spec.Replicas = ptr.To[int32](9)
	st.Labels = map[string]string{"ignored": "yes"}
	status, err := e.deployments.UpdateStatus(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if *status.Spec.Replicas != 3 || status.Status.Replicas != 3 || status.Generation != 2 || status.Labels["ignored"] != "" {
		t.Errorf("UpdateStatus: spec.replicas %d, status.replicas %d, generation %d, labels %v; want 3, 3, 2, none", *status.Spec.Replicas, status.Status.Replicas, status.Generation, status.Labels)
	}
	if _, err := e.deployments.UpdateStatus(ctx, st); !apierrors.IsConflict(err) {
		t.Errorf("UpdateStatus at a stale resourceVersion: %v, want Conflict", err)
	}
	cached, err := e.deployments.Get(ctx, ns, "web")
	if err != nil || cached.Status.Replicas != 3 {
		t.Errorf("cache after UpdateStatus: %v, %v; want status.replicas 3", cached, err)
	}

	// A metadata-only change does not bump generation.
	labelled := status.DeepCopy()
	labelled.Labels = map[string]string{"tier": "web"}
	if got, err := e.deployments.Update(ctx, labelled); err != nil || got.Generation != 2 {
		t.Errorf("label change: generation %d, %v; want 2", got.Generation, err)
	}
}

func TestServer_WithoutAStatusSubresourceUpdateWritesTheStatus(t *testing.T) {
	e := newEnv(t, kloopfake.Options{Resources: []kloopfake.Resource{{Kind: batch.Kind, NoStatusSubresource: true}}})
	ctx := t.Context()
	cj := cronJob("nightly")
	cj.Status.LastScheduleTime = &metav1.Time{}
	made, err := e.cronJobs.Create(ctx, cj)
	if err != nil {
		t.Fatal(err)
	}
	up := made.DeepCopy()
	up.Status.Active = []corev1.ObjectReference{{Name: "job"}}
	got, err := e.cronJobs.Update(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Active) != 1 {
		t.Errorf("Update without a status subresource stored status %+v, want the one written", got.Status)
	}
	if _, err := e.cronJobs.UpdateStatus(ctx, got); !apierrors.IsNotFound(err) {
		t.Errorf("UpdateStatus without a status subresource: %v, want NotFound", err)
	}
	// WriteStatus finds out through discovery and updates the object. It
	// compares with the cache, so read the object from there first.
	cached, err := e.cronJobs.Get(ctx, ns, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	again := cached.DeepCopy()
	again.Status.Active = nil
	if _, wrote, err := e.cronJobs.WriteStatus(ctx, again); err != nil || !wrote {
		t.Errorf("WriteStatus without a status subresource: wrote %v, %v", wrote, err)
	}
}

func TestServer_FinalizersHoldADelete(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	cj := cronJob("held")
	cj.Finalizers = []string{"example.com/a", "example.com/b"}
	made, err := e.cronJobs.Create(ctx, cj)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cronJobs.Delete(ctx, ns, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting, err := e.cronJobs.Get(ctx, ns, "held")
	if err != nil {
		t.Fatalf("Get of an object held by finalizers: %v", err)
	}
	if deleting.DeletionTimestamp == nil || deleting.Generation != made.Generation+1 {
		t.Fatalf("after Delete: deletionTimestamp %v, generation %d; want set, %d", deleting.DeletionTimestamp, deleting.Generation, made.Generation+1)
	}
	if err := e.cronJobs.Delete(ctx, ns, "held", metav1.DeleteOptions{}); err != nil {
		t.Errorf("a second Delete: %v", err)
	}
	if again, _ := e.cronJobs.Resource().Get(ctx, ns, "held"); again.ResourceVersion != deleting.ResourceVersion {
		t.Errorf("a second Delete wrote (resourceVersion %s, was %s)", again.ResourceVersion, deleting.ResourceVersion)
	}

	more := deleting.DeepCopy()
	more.Finalizers = append(more.Finalizers, "example.com/c")
	if _, err := e.cronJobs.Update(ctx, more); !apierrors.IsInvalid(err) {
		t.Errorf("adding a finalizer to an object being deleted: %v, want Invalid", err)
	}
	// Finalize's JSON patch takes one off; the object stays for the other.
	one := []byte(`[{"op":"replace","path":"/metadata/resourceVersion","value":"` + deleting.ResourceVersion + `"},{"op":"remove","path":"/metadata/finalizers/0"}]`)
	if _, err := e.cronJobs.Patch(ctx, ns, "held", types.JSONPatchType, one, client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cronJobs.Patch(ctx, ns, "held", types.JSONPatchType, one, client.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("a JSON patch guarded by a stale resourceVersion: %v, want Conflict", err)
	}
	last, err := e.cronJobs.Get(ctx, ns, "held")
	if err != nil || !slices.Equal(last.Finalizers, []string{"example.com/b"}) {
		t.Fatalf("after removing one finalizer: %v, %v; want it held by example.com/b", last, err)
	}
	off := last.DeepCopy()
	off.Finalizers = nil
	if _, err := e.cronJobs.Update(ctx, off); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cronJobs.Get(ctx, ns, "held"); !apierrors.IsNotFound(err) {
		t.Errorf("Get after the last finalizer came off: %v, want NotFound (the object is gone)", err)
	}
}

func TestServer_OwnerReferencesAreKeptAndNothingIsCollected(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	owner, err := e.cronJobs.Create(ctx, cronJob("owner"))
	if err != nil {
		t.Fatal(err)
	}
	child := configMap("child")
	if err := e.app.SetControllerReference(owner, child); err != nil {
		t.Fatal(err)
	}
	if _, err := e.configMaps.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	if err := e.cronJobs.Delete(ctx, ns, "owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cronJobs.Get(ctx, ns, "owner"); !apierrors.IsNotFound(err) {
		t.Errorf("owner after Delete: %v, want NotFound (no foregroundDeletion finalizer without a garbage collector)", err)
	}
	got, err := e.configMaps.Get(ctx, ns, "child")
	if err != nil {
		t.Fatalf("the child after its owner's delete: %v (there is no garbage collector)", err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != owner.UID || ref.Kind != "CronJob" {
		t.Errorf("owner reference %+v, want the CronJob's as given", got.OwnerReferences)
	}
}

func TestServer_Patches(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	if _, err := e.deployments.Create(ctx, deployment("web")); err != nil {
		t.Fatal(err)
	}
	merged, err := e.deployments.Patch(ctx, ns, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"1"}},"spec":{"replicas":2}}`), client.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if merged.Annotations["a"] != "1" || *merged.Spec.Replicas != 2 || merged.Generation != 2 {
		t.Errorf("merge patch: annotations %v, replicas %d, generation %d", merged.Annotations, *merged.Spec.Replicas, merged.Generation)
	}
	// A strategic merge patch merges containers by name; a merge patch
	// would replace the list.
	smp := `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"envoy:1"}]}}}}`
	sm, err := e.deployments.Patch(ctx, ns, "web", types.StrategicMergePatchType, []byte(smp), client.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if names := containerNames(sm); !slices.Equal(names, []string{"sidecar", "main"}) && !slices.Equal(names, []string{"main", "sidecar"}) {
		t.Errorf("strategic merge patch: containers %v, want main and sidecar", names)
	}
	jp := `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:2"}]`
	if _, err := e.deployments.Patch(ctx, ns, "web", types.JSONPatchType, []byte(jp), client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := `[{"op":"remove","path":"/spec/nothing/here"}]`
	if _, err := e.deployments.Patch(ctx, ns, "web", types.JSONPatchType, []byte(bad), client.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a JSON patch of a missing path: %v, want Invalid", err)
	}
	status, err := e.deployments.Patch(ctx, ns, "web", types.MergePatchType, []byte(`{"spec":{"replicas":9},"status":{"replicas":2}}`), client.PatchOptions{Subresource: "status"})
	if err != nil {
		t.Fatal(err)
	}
	if status.Status.Replicas != 2 || *status.Spec.Replicas != 2 {
		t.Errorf("status patch: status.replicas %d, spec.replicas %d; want 2, 2 (the spec untouched)", status.Status.Replicas, *status.Spec.Replicas)
	}
	cached, err := e.deployments.Get(ctx, ns, "web")
	if err != nil || cached.Spec.Template.Spec.Containers[0].Image != "nginx:2" || cached.Status.Replicas != 2 {
		t.Errorf("cache after the patches: %v, %v", cached, err)
	}

	if _, err := e.cronJobs.Create(ctx, cronJob("c")); err != nil {
		t.Fatal(err)
	}
	_, err = e.cronJobs.Patch(ctx, ns, "c", types.StrategicMergePatchType, []byte(`{"spec":{"suspend":true}}`), client.PatchOptions{})
	if code := statusCode(err); code != http.StatusUnsupportedMediaType {
		t.Errorf("strategic merge patch of a custom resource: %v (code %d), want 415 as the API server answers", err, code)
	}
}

func TestServer_ServerSideApply(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	ctx := t.Context()
	want := deployment("web")
	want.Labels = map[string]string{"owner": "test"}
	made, err := e.deployments.Apply(ctx, whole{want}, client.PatchOptions{})
	if err != nil {
		t.Fatalf("Apply of a new object: %v", err)
	}
	if made.UID == "" || made.Generation != 1 || made.Labels["owner"] != "test" || len(made.ManagedFields) == 0 || made.ManagedFields[0].Manager != "test" {
		t.Errorf("Apply created %+v, want a uid, generation 1, the label and the App's managed fields", made.ObjectMeta)
	}

	// Another field manager takes spec.replicas: the App's next apply of
	// it conflicts unless forced.
	other, err := client.New(e.srv.Config(), client.Options{Scheme: e.app.Options().Scheme, FieldManager: "other", DisableWriteTracking: true})
	if err != nil {
		t.Fatal(err)
	}
	deps, err := client.NewResource[*appsv1.Deployment](other, e.deployments.GVR())
	if err != nil {
		t.Fatal(err)
	}
	theirs := appsv1ac.Deployment("web", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(4))
	if _, err := deps.Apply(ctx, theirs, client.PatchOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.deployments.Apply(ctx, whole{want}, client.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Apply of a field another manager owns: %v, want Conflict", err)
	}
	live, err := e.deployments.Resource().Get(ctx, ns, "web") // the cache need not have the other client's write yet
	if err != nil {
		t.Fatal(err)
	}
	// Repair: a forced apply guarded by live's resourceVersion.
	repaired, did, err := e.deployments.Repair(ctx, live, whole{want.DeepCopy()})
	if err != nil || !did || *repaired.Spec.Replicas != 1 || repaired.Generation != live.Generation+1 {
		t.Errorf("Repair: replicas %v, generation %d, %v, %v; want 1, %d", repaired.Spec.Replicas, repaired.Generation, did, err, live.Generation+1)
	}
	if _, _, err := e.deployments.Repair(ctx, live, whole{want.DeepCopy()}); !apierrors.IsConflict(err) {
		t.Errorf("Repair at a stale resourceVersion: %v, want Conflict", err)
	}

	// Fields the App applied before and no longer applies go.
	less := want.DeepCopy()
	less.Labels = nil
	got, err := e.deployments.Apply(ctx, whole{less}, client.PatchOptions{Force: true})
	if err != nil || got.Labels["owner"] != "" {
		t.Errorf("Apply without the label: labels %v, %v; want the label gone", got.Labels, err)
	}
}

// whole sends a typed object, every field of it, as an apply
// configuration.
type whole struct{ obj any }

func (whole) IsApplyConfiguration()          {}
func (w whole) MarshalJSON() ([]byte, error) { return json.Marshal(w.obj) }

func containerNames(d *appsv1.Deployment) []string {
	var names []string
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

func statusCode(err error) int32 {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Code
	}
	return 0
}

func TestServer_SelectorsOnListAndWatch(t *testing.T) {
	srv, err := kloopfake.NewServer(kloopfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{})
	if err != nil {
		t.Fatal(err)
	}
	web := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{LabelSelector: "tier=web", FieldSelector: "metadata.namespace=" + ns})
	stop, err := kloopfake.Start(t.Context(), app)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := t.Context()
	a := configMap("a")
	a.Labels = map[string]string{"tier": "web"}
	other := configMap("other")
	other.Namespace = "elsewhere"
	other.Labels = a.Labels
	for _, cm := range []*corev1.ConfigMap{a, configMap("b"), other} {
		if _, err := web.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	got, err := web.List(ctx, "", labels.Everything())
	if err != nil || len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("cache of tier=web in %s: %v, %v; want a alone", ns, got, err)
	}
	// Relabelled out of the selector, a leaves the cache: the watch says
	// DELETED.
	if _, err := web.Patch(ctx, ns, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"db"}}}`), client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := web.Get(ctx, ns, "a"); !apierrors.IsNotFound(err) {
		t.Errorf("a relabelled out of the selector: %v, want NotFound in the cache", err)
	}
	_, _, err = web.Resource().List(ctx, ns, metav1.ListOptions{FieldSelector: "data.k=v"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a field selector on data.k: %v, want BadRequest naming what is supported", err)
	}
	byName, _, err := web.Resource().List(ctx, "", metav1.ListOptions{FieldSelector: "metadata.name=b"})
	if err != nil || len(byName) != 1 || byName[0].Name != "b" {
		t.Errorf("List by metadata.name=b: %v, %v", byName, err)
	}
}

func TestServer_InterceptFailsARequestAndChangesNothing(t *testing.T) {
	e := newEnv(t, kloopfake.Options{Objects: []runtime.Object{configMap("a")}})
	ctx := t.Context()
	var seen []kloopfake.Request
	e.srv.Intercept(func(r kloopfake.Request) error {
		if r.Verb == "list" || r.Verb == "watch" {
			return nil // the App's informers, which may watch again at any time
		}
		seen = append(seen, r)
		if r.Verb == "update" {
			return apierrors.NewConflict(r.Resource.GroupResource(), r.Name, errors.New("injected"))
		}
		return nil
	})
	cur, err := e.configMaps.Get(ctx, ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	up := cur.DeepCopy()
	up.Data["k"] = "w"
	if _, err := e.configMaps.Update(ctx, up); !apierrors.IsConflict(err) {
		t.Fatalf("intercepted update: %v, want the injected Conflict", err)
	}
	e.srv.Intercept(nil)
	stored, err := e.configMaps.Resource().Get(ctx, ns, "a")
	if err != nil || stored.Data["k"] != "v" || stored.ResourceVersion != cur.ResourceVersion {
		t.Errorf("stored after the failed update: %v, %v; want it unchanged", stored, err)
	}
	if len(seen) != 1 || seen[0].Verb != "update" || seen[0].Namespace != ns || seen[0].Name != "a" || seen[0].Resource.Resource != "configmaps" {
		t.Errorf("intercepted %+v, want one update of configmaps %s/a", seen, ns)
	}
}

func TestServer_ObjectsKeepStatusAndUnknownKindsAreRejected(t *testing.T) {
	d := deployment("seeded")
	d.Status.ReadyReplicas = 1
	e := newEnv(t, kloopfake.Options{Objects: []runtime.Object{d}})
	got, err := e.deployments.Get(t.Context(), ns, "seeded")
	if err != nil || got.Status.ReadyReplicas != 1 || got.UID == "" {
		t.Errorf("seeded: %v, %v; want status as given and a uid", got, err)
	}
	if _, err := kloopfake.NewServer(kloopfake.Options{Objects: []runtime.Object{&metav1.Status{}}}); err == nil {
		t.Error("Objects of a kind the server does not serve: NewServer succeeded")
	}
	if _, err := kloopfake.NewServer(kloopfake.Options{Resources: []kloopfake.Resource{{Kind: batch.Kind}}}); err == nil || !strings.Contains(err.Error(), "AddToScheme") {
		t.Errorf("a Resource of a kind outside the scheme: %v, want an error saying to add it", err)
	}
}

func TestServer_EndedWatchesAreWatchedAgain(t *testing.T) {
	e := newEnv(t, kloopfake.Options{})
	kloopfake.EndWatches(e.srv)
	// The informers see their watches end and try again; the server still
	// answers, so reads and writes work on.
	ctx := context.WithoutCancel(t.Context())
	if _, err := e.configMaps.Create(ctx, configMap("after")); err != nil {
		t.Fatal(err)
	}
}
