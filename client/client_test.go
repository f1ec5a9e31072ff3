package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/watcher"
)

var (
	configMapGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	namespaceGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
)

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, cfg *rest.Config, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func resource[T interface {
	*E
	watcher.Object
}, E any](t *testing.T, c *client.Client, gvr schema.GroupVersionResource) *client.Resource[T] {
	t.Helper()
	r, err := client.NewResource[T](c, gvr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, c *client.Client, name string) string {
	t.Helper()
	ns := resource[*corev1.Namespace](t, c, namespaceGVR)
	ctx := testCtx(t, 30*time.Second)
	if _, err := ns.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ns.Delete(ctx, "", name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// TestAgainstAPIServer runs every test that needs an API server on one
// control plane; each subtest works in a namespace of its own.
func TestAgainstAPIServer(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	installWidgetCRD(t, env.Config)

	t.Run("BuiltInTypeRoundTripsThroughCreateGetListUpdatePatchDelete", func(t *testing.T) {
		testBuiltInCRUD(t, env)
	})
	t.Run("BuiltInTypesTravelAsProtobufCustomResourcesAsJSON", func(t *testing.T) {
		testContentTypes(t, env)
	})
	t.Run("CustomResourceRoundTripsWithStatusSubresource", func(t *testing.T) {
		testCustomResourceCRUD(t, env)
	})
	t.Run("ServerSideApplyOwnsFieldsAndConflictsWithoutForce", func(t *testing.T) {
		testApply(t, env)
	})
	t.Run("ListFollowsContinueTokens", func(t *testing.T) {
		testListPages(t, env)
	})
	t.Run("CachedGetWaitsUntilCacheHasOwnUpdate", func(t *testing.T) {
		testCachedGetWaitsForUpdate(t, env)
	})
	t.Run("CachedReadsWaitForOwnCreateAndDelete", func(t *testing.T) {
		testCachedReadsCreateDelete(t, env)
	})
	t.Run("CachedGetReturnsErrCacheStaleWhenCacheStaysBehind", func(t *testing.T) {
		testCachedGetStale(t, env)
	})
	t.Run("CachedListControlledByWaitsOnlyForWritesThatCanChangeIt", func(t *testing.T) {
		testCachedListControlledBy(t, env)
	})
	t.Run("RemovingTheLastFinalizerOfADeletingObjectIsTrackedAsItsDelete", func(t *testing.T) {
		testLastFinalizerRemoval(t, env)
	})
}

func testLastFinalizerRemoval(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "last-finalizer")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Finalizers: []string{"kloop.dev/a", "kloop.dev/b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, ns, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	key := cache.Key{Namespace: ns, Name: "held"}
	remove := []byte(`[{"op":"remove","path":"/metadata/finalizers/0"}]`)
	// One finalizer left: the object stays, at a new resourceVersion.
	if _, err := cms.Patch(ctx, ns, "held", types.JSONPatchType, remove, client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if w, ok := c.Tracker().Pending(configMapGVR.GroupResource(), key); !ok || w.Gone {
		t.Fatalf("pending write after removing one of two finalizers %+v (%v), want an update", w, ok)
	}
	// The last one: the API server deletes the object.
	if _, err := cms.Patch(ctx, ns, "held", types.JSONPatchType, remove, client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if w, ok := c.Tracker().Pending(configMapGVR.GroupResource(), key); !ok || !w.Gone || w.UID != created.UID {
		t.Errorf("pending write after removing the last finalizer %+v (%v), want the deletion of uid %s", w, ok, created.UID)
	}
	if _, err := cms.Get(ctx, ns, "held"); !apierrors.IsNotFound(err) {
		t.Errorf("Get after removing the last finalizer = %v, want NotFound", err)
	}
}

func testBuiltInCRUD(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "builtin-crud")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: map[string]string{"app": "x"}},
		Data:       map[string]string{"k": "v1"},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" {
		t.Fatalf("create returned %+v, want the stored object with uid and resourceVersion", created.ObjectMeta)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: got %v, want AlreadyExists", err)
	}
	got, err := cms.Get(ctx, ns, "a")
	if err != nil || got.UID != created.UID || got.Data["k"] != "v1" {
		t.Fatalf("get: %v, %+v; want the created object", err, got)
	}
	if mf := got.ManagedFields; len(mf) == 0 || mf[0].Manager != client.DefaultFieldManager {
		t.Errorf("managedFields %+v, want manager %q", mf, client.DefaultFieldManager)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}); err != nil {
		t.Fatalf("create b: %v", err)
	}
	items, rv, err := cms.List(ctx, ns, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil || rv == "" || len(items) != 1 || items[0].Name != "a" {
		t.Fatalf("list app=x: %v, rv %q, %d items; want only a", err, rv, len(items))
	}

	upd := got.DeepCopy()
	upd.Data["k"] = "v2"
	updated, err := cms.Update(ctx, upd)
	if err != nil || updated.Data["k"] != "v2" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update: %v, %+v", err, updated)
	}
	// got is now stale: its resourceVersion is a failed precondition.
	if _, err := cms.Update(ctx, got); !apierrors.IsConflict(err) {
		t.Fatalf("update from a stale read: got %v, want Conflict", err)
	}

	patched, err := cms.Patch(ctx, ns, "a", types.MergePatchType, []byte(`{"data":{"p":"q"}}`), client.PatchOptions{})
	if err != nil || patched.Data["p"] != "q" || patched.Data["k"] != "v2" {
		t.Fatalf("merge patch: %v, %+v", err, patched)
	}

	// DeleteOptions reach the server: a dry run deletes nothing.
	if err := cms.Delete(ctx, ns, "a", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run delete: %v", err)
	}
	if _, err := cms.Get(ctx, ns, "a"); err != nil {
		t.Fatalf("get after a dry-run delete: %v (the options were not sent)", err)
	}
	if w, _ := c.Tracker().Pending(configMapGVR.GroupResource(), cache.Key{Namespace: ns, Name: "a"}); w.Gone {
		t.Fatal("a dry-run delete was tracked as a delete; cached reads would wait for it in vain")
	}
	if err := cms.Delete(ctx, ns, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cms.Get(ctx, ns, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: got %v, want NotFound", err)
	}
	if err := cms.Delete(ctx, ns, "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: got %v, want NotFound", err)
	}
}

func testCustomResourceCRUD(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{Scheme: widgetScheme(t)})
	ns := newNamespace(t, c, "custom-crud")
	widgets := resource[*Widget](t, c, widgetGVR)

	// installWidgetCRD waited until the CRD is served.
	created, err := widgets.Create(ctx, &Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"},
		Spec:       WidgetSpec{Size: 3, Color: "red"},
		Status:     WidgetStatus{Ready: true},
	})
	if err != nil {
		t.Fatalf("create widget: %v", err)
	}
	if created.Spec.Size != 3 || created.Status.Ready {
		t.Fatalf("created %+v: want spec kept and status dropped (status is a subresource)", created)
	}

	st := created.DeepCopyObject().(*Widget)
	st.Status.Ready = true
	st.Spec.Size = 99 // ignored by the status subresource
	withStatus, err := widgets.UpdateStatus(ctx, st)
	if err != nil || !withStatus.Status.Ready || withStatus.Spec.Size != 3 {
		t.Fatalf("update status: %v, %+v; want ready and size still 3", err, withStatus)
	}

	sp := withStatus.DeepCopyObject().(*Widget)
	sp.Spec.Color = "blue"
	sp.Status.Ready = false // ignored by the main resource
	updated, err := widgets.Update(ctx, sp)
	if err != nil || updated.Spec.Color != "blue" || !updated.Status.Ready {
		t.Fatalf("update: %v, %+v; want blue and still ready", err, updated)
	}

	patched, err := widgets.Patch(ctx, ns, "w", types.MergePatchType, []byte(`{"status":{"ready":false}}`), client.PatchOptions{Subresource: "status"})
	if err != nil || patched.Status.Ready {
		t.Fatalf("status merge patch: %v, %+v", err, patched)
	}

	items, _, err := widgets.List(ctx, ns, metav1.ListOptions{})
	if err != nil || len(items) != 1 || items[0].Spec.Color != "blue" {
		t.Fatalf("list: %v, %+v", err, items)
	}
	if err := widgets.Delete(ctx, ns, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := widgets.Get(ctx, ns, "w"); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: got %v, want NotFound", err)
	}
}

func testApply(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	alice := newClient(t, env.Config, client.Options{Scheme: widgetScheme(t), FieldManager: "alice"})
	bob := newClient(t, env.Config, client.Options{Scheme: widgetScheme(t), FieldManager: "bob"})
	ns := newNamespace(t, alice, "apply")
	aw := resource[*Widget](t, alice, widgetGVR)
	bw := resource[*Widget](t, bob, widgetGVR)

	w, err := aw.Apply(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: WidgetSpec{Size: 1, Color: "red"}}, client.PatchOptions{})
	if err != nil || w.Spec.Size != 1 || w.Spec.Color != "red" {
		t.Fatalf("apply creates: %v, %+v", err, w)
	}
	// bob sets a field alice does not own: no conflict, both kept.
	if _, err := bw.Patch(ctx, ns, "w", types.ApplyPatchType,
		[]byte(`{"apiVersion":"test.kloop.dev/v1","kind":"Widget","metadata":{"name":"w","labels":{"by":"bob"}}}`), client.PatchOptions{}); err != nil {
		t.Fatalf("bob applies a label: %v", err)
	}
	// bob wants alice's field: conflict without force, ownership with it.
	_, err = bw.Apply(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Labels: map[string]string{"by": "bob"}}, Spec: WidgetSpec{Color: "green"}}, client.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("bob applies alice's field without force: got %v, want Conflict", err)
	}
	w, err = bw.Apply(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Labels: map[string]string{"by": "bob"}}, Spec: WidgetSpec{Color: "green"}}, client.PatchOptions{Force: true})
	if err != nil || w.Spec.Color != "green" || w.Spec.Size != 1 || w.Labels["by"] != "bob" {
		t.Fatalf("bob forces: %v, %+v; want green, size 1 kept, label kept", err, w)
	}
	// alice drops size from her configuration: her field goes away.
	w, err = aw.Apply(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}, client.PatchOptions{})
	if err != nil || w.Spec.Size != 0 || w.Spec.Color != "green" {
		t.Fatalf("alice applies without size: %v, %+v; want size removed, bob's color kept", err, w)
	}
	managers := map[string]bool{}
	for _, mf := range w.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers["bob"] {
		t.Errorf("managedFields %+v: want an entry for bob", w.ManagedFields)
	}
	// Status through apply on the subresource.
	w, err = aw.Apply(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Status: WidgetStatus{Ready: true}}, client.PatchOptions{Subresource: "status"})
	if err != nil || !w.Status.Ready {
		t.Fatalf("apply status: %v, %+v", err, w)
	}
}

func testListPages(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	c := newClient(t, env.Config, client.Options{})
	ns := newNamespace(t, c, "list-pages")
	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	items, rv, err := cms.List(ctx, ns, metav1.ListOptions{Limit: 2})
	if err != nil || rv == "" {
		t.Fatalf("list: %v, rv %q", err, rv)
	}
	var names []string
	for _, it := range items {
		names = append(names, it.Name)
	}
	// kube-root-ca.crt is not there: no controller manager runs.
	if len(names) != 5 || names[0] != "a" || names[4] != "e" {
		t.Fatalf("list with page size 2 returned %v, want a..e", names)
	}
}

func TestStaleError_MatchesErrCacheStale(t *testing.T) {
	var err error = &client.StaleError{Want: "5", Have: "3"}
	if !errors.Is(err, client.ErrCacheStale) {
		t.Fatalf("errors.Is(%v, ErrCacheStale) = false", err)
	}
	var se *client.StaleError
	if !errors.As(errors.Join(errors.New("x"), err), &se) || se.Want != "5" {
		t.Fatalf("errors.As did not find the StaleError")
	}
}

// contentTypes records, per request, its method, the request's and the
// response's Content-Type.
type contentTypes struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		c.seen = append(c.seen, r.Method+" "+r.Header.Get("Content-Type")+" -> "+resp.Header.Get("Content-Type"))
		c.mu.Unlock()
	}
	return resp, err
}

func (c *contentTypes) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seen
	c.seen = nil
	return s
}

func testContentTypes(t *testing.T, env *testenv.Env) {
	ctx := testCtx(t, time.Minute)
	ct := &contentTypes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct })
	c := newClient(t, cfg, client.Options{Scheme: widgetScheme(t)})
	ns := newNamespace(t, c, "content-types")
	ct.take()

	cms := resource[*corev1.ConfigMap](t, c, configMapGVR)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Data: map[string]string{"k": "v"}})
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("create ConfigMap: %v, %+v", err, cm)
	}
	if _, err := cms.Get(ctx, ns, "a"); err != nil {
		t.Fatal(err)
	}
	proto := "application/vnd.kubernetes.protobuf"
	if got, want := ct.take(), []string{"POST " + proto + " -> " + proto, "GET  -> " + proto}; !slices.Equal(got, want) {
		t.Errorf("ConfigMap create and get went as %q, want %q", got, want)
	}
	// Delete reads the server's answer as JSON, so asks for JSON.
	if err := cms.Delete(ctx, ns, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ct.take(); len(got) != 1 || !strings.HasPrefix(got[0], "DELETE application/json -> application/json") {
		t.Errorf("ConfigMap delete went as %q, want JSON both ways", got)
	}

	widgets := resource[*Widget](t, c, widgetGVR)
	if _, err := widgets.Create(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: WidgetSpec{Size: 1}}); err != nil {
		t.Fatalf("create widget: %v", err)
	}
	if got := ct.take(); len(got) != 1 || !strings.HasPrefix(got[0], "POST application/json -> application/json") {
		t.Errorf("Widget create went as %q, want JSON both ways (custom resources have no protobuf form)", got)
	}
}
