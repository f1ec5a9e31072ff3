package foo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv/await"
)

// ready returns the Foo's Ready condition, or nil.
func (h *harness) ready(ctx context.Context, name string) (*metav1.Condition, *v1alpha1.Foo, error) {
	f, err := h.foos.Get(ctx, h.ns, name)
	if err != nil {
		return nil, nil, err
	}
	return meta.FindStatusCondition(f.Status.Conditions, "Ready"), f, nil
}

// waitReady waits until the Foo's Ready condition has status and reason.
func (h *harness) waitReady(name string, status metav1.ConditionStatus, reason string) *v1alpha1.Foo {
	h.t.Helper()
	var f *v1alpha1.Foo
	h.until(60*time.Second, fmt.Sprintf("Foo %s Ready=%s %s", name, status, reason), func(ctx context.Context) (bool, string, error) {
		c, got, err := h.ready(ctx, name)
		if err != nil || c == nil {
			return false, "no Ready condition", err
		}
		f = got
		return c.Status == status && c.Reason == reason && got.Status.ObservedGeneration == got.Generation,
			fmt.Sprintf("Ready=%s %s %q, observedGeneration %d of %d", c.Status, c.Reason, c.Message, got.Status.ObservedGeneration, got.Generation), nil
	})
	return f
}

func TestFoo_AMissingDeploymentNameShowsInTheReadyConditionAndAWarningUntilItIsSet(t *testing.T) {
	h := newHarness(t)
	h.createFoo(newFoo("nameless", "", ptr.To[int32](1)))
	h.waitReady("nameless", metav1.ConditionFalse, foo.ReasonDeploymentNameMissing)
	h.until(30*time.Second, "Warning DeploymentNameMissing event", func(ctx context.Context) (bool, string, error) {
		evs, err := h.events(ctx, "nameless", foo.ReasonDeploymentNameMissing)
		return err == nil && len(evs) == 1 && evs[0].Type == corev1.EventTypeWarning, fmt.Sprintf("%d events", len(evs)), err
	})
	if _, err := h.foos.Patch(t.Context(), h.ns, "nameless", types.MergePatchType, []byte(`{"spec":{"deploymentName":"named"}}`), client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitAvailable("nameless", "named", 1)
	h.waitReady("nameless", metav1.ConditionTrue, foo.ReasonDeploymentAvailable)
}

func TestFoo_AForeignDeploymentShowsInTheStatusWhichIsWrittenEvenWithNothingAvailable(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	labels := map[string]string{"app": "theirs"}
	if _, err := h.kc.AppsV1().Deployments(h.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "httpd"}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.createFoo(newFoo("blocked", "theirs", ptr.To[int32](1)))
	h.waitReady("blocked", metav1.ConditionFalse, foo.ReasonDeploymentNotOwned)
	// status.availableReplicas is there as 0, as kubectl wait --for=jsonpath expects.
	dyn := dynamic.NewForConfigOrDie(h.env.Config)
	u, err := dyn.Resource(v1alpha1.Resource).Namespace(h.ns).Get(ctx, "blocked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, found, err := unstructuredInt(u.Object, "status", "availableReplicas"); err != nil || !found || v != 0 {
		t.Errorf("status.availableReplicas = %v (found %v, %v), want present and 0", v, found, err)
	}
	// Events are written after the failed sync, asynchronously.
	h.until(30*time.Second, "Warning ErrResourceExists event", func(ctx context.Context) (bool, string, error) {
		evs, err := h.events(ctx, "blocked", foo.ErrResourceExists)
		return err == nil && len(evs) > 0 && evs[0].Type == corev1.EventTypeWarning, fmt.Sprintf("events %v", evs), err
	})
}

func TestFoo_DriftInWhatTheControllerSetsIsRepairedAndWhatOthersAddSurvives(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.createFoo(newFoo("steady", "steady", ptr.To[int32](2)))
	h.waitAvailable("steady", "steady", 2)
	patch := `{"spec":{"replicas":3,"template":{"metadata":{"annotations":{"example.com/note":"kept"}},"spec":{"containers":[{"name":"nginx","image":"httpd:2","env":[{"name":"EXTRA","value":"1"}]}]}}}}`
	if _, err := h.kc.AppsV1().Deployments(h.ns).Patch(ctx, "steady", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	h.until(30*time.Second, "drift repaired, additions kept", func(ctx context.Context) (bool, string, error) {
		d, err := h.deployment(ctx, "steady")
		if err != nil {
			return false, "", err
		}
		c := d.Spec.Template.Spec.Containers[0]
		env := ""
		for _, e := range c.Env {
			env += e.Name + "=" + e.Value
		}
		state := fmt.Sprintf("replicas %d, image %s, env %q, annotation %q", ptr.Deref(d.Spec.Replicas, 0), c.Image, env, d.Spec.Template.Annotations["example.com/note"])
		return ptr.Deref(d.Spec.Replicas, 0) == 2 && c.Image == foo.NginxImage && env == "EXTRA=1" && d.Spec.Template.Annotations["example.com/note"] == "kept", state, nil
	})
}

func TestFoo_RenamingTheDeploymentDeletesTheOldOneOnceTheNewOneIsAvailable(t *testing.T) {
	h := newHarness(t)
	h.createFoo(newFoo("mover", "first", ptr.To[int32](1)))
	h.waitAvailable("mover", "first", 1)
	if _, err := h.foos.Patch(t.Context(), h.ns, "mover", types.MergePatchType, []byte(`{"spec":{"deploymentName":"second"}}`), client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReady("mover", metav1.ConditionTrue, foo.ReasonDeploymentAvailable)
	h.until(60*time.Second, "old Deployment deleted", func(ctx context.Context) (bool, string, error) {
		_, err := h.deployment(ctx, "first")
		return apierrors.IsNotFound(err), fmt.Sprintf("get first: %v", err), nil
	})
	if d, err := h.deployment(t.Context(), "second"); err != nil || d.Status.AvailableReplicas != 1 {
		t.Errorf("new Deployment: %v, err %v; want available", d, err)
	}
}

func TestFoo_EachDeletionPropagationPolicyDoesWhatItSays(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	policies := []metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan}
	for _, p := range policies {
		name := "del-" + strings.ToLower(string(p))
		h.createFoo(newFoo(name, name, ptr.To[int32](1)))
	}
	for _, p := range policies {
		name := "del-" + strings.ToLower(string(p))
		h.waitAvailable(name, name, 1)
		if err := h.foos.Delete(ctx, h.ns, name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range policies {
		name := "del-" + strings.ToLower(string(p))
		h.until(60*time.Second, fmt.Sprintf("%s deletion of Foo %s", p, name), func(ctx context.Context) (bool, string, error) {
			_, ferr := h.foos.Get(ctx, h.ns, name)
			d, derr := h.deployment(ctx, name)
			if p == metav1.DeletePropagationOrphan {
				// The Deployment stays, no longer owned.
				return apierrors.IsNotFound(ferr) && derr == nil && len(d.OwnerReferences) == 0, fmt.Sprintf("foo %v, deployment %v", ferr, derr), nil
			}
			return apierrors.IsNotFound(ferr) && apierrors.IsNotFound(derr), fmt.Sprintf("foo %v, deployment %v", ferr, derr), nil
		})
	}
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		if cur, ok = m[p]; !ok {
			return 0, false, nil
		}
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	}
	return 0, true, fmt.Errorf("%v is a %T", cur, cur)
}

// The first status is written by the sync after the one that created the
// Deployment; it must come even when the Deployment never becomes
// available (here no pod may be created in the namespace).
func TestFoo_AFooWhoseDeploymentNeverBecomesAvailableStillGetsItsStatus(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if _, err := h.kc.CoreV1().ResourceQuotas(h.ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.QuotaEnforced(t, h.kc, h.ns)
	h.createFoo(newFoo("starved", "starved", ptr.To[int32](1)))
	h.waitReady("starved", metav1.ConditionFalse, foo.ReasonDeploymentProgressing)
	u, err := dynamic.NewForConfigOrDie(h.env.Config).Resource(v1alpha1.Resource).Namespace(h.ns).Get(ctx, "starved", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, found, err := unstructuredInt(u.Object, "status", "availableReplicas"); err != nil || !found || v != 0 {
		t.Errorf("status.availableReplicas = %v (found %v, %v), want present and 0", v, found, err)
	}
	d, err := h.kc.AppsV1().Deployments(h.ns).Get(ctx, "starved", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 0 {
		t.Errorf("Deployment starved has %d available replicas; the quota should keep it at 0", d.Status.AvailableReplicas)
	}
}

// Issue 38: a deploymentName that is no object name fails validation on
// the API server, which retrying cannot fix. The Foo shows it within
// seconds as Ready=False and a Warning event, and the controller stops
// retrying it: at most 3 syncs in the first 30 s. Once the Foo changes, it
// is synced again.
func TestFoo_AnInvalidDeploymentNameShowsInTheConditionAndAnEventAndIsNotRetried(t *testing.T) {
	h := newHarness(t)
	start := time.Now()
	h.createFoo(newFoo("invalid", "Bad_Name!", ptr.To[int32](1)))
	h.waitReady("invalid", metav1.ConditionFalse, foo.ReasonDeploymentInvalid)
	h.until(30*time.Second, "Warning DeploymentInvalid event", func(ctx context.Context) (bool, string, error) {
		evs, err := h.events(ctx, "invalid", foo.ReasonDeploymentInvalid)
		if err != nil || len(evs) == 0 {
			return false, "no event", err
		}
		return evs[0].Type == corev1.EventTypeWarning && strings.Contains(evs[0].Message, "Bad_Name!"), evs[0].Type + " " + evs[0].Message, nil
	})
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("condition and event shown %v after the Foo was created, want within seconds", d)
	}
	// A measurement, not a wait for goroutines: how many syncs failed in
	// the Foo's first 30 s.
	select {
	case <-time.After(30*time.Second - time.Since(start)):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	failed := func() int {
		n := 0
		for l := range strings.Lines(h.logs.String()) {
			if strings.Contains(l, `msg="Reconcile failed`) && strings.Contains(l, " key="+h.ns+"/invalid ") {
				n++
			}
		}
		return n
	}
	if n := failed(); n == 0 || n > 3 {
		t.Errorf("%d failed syncs of the invalid Foo in 30 s, want 1 to 3 (not retried)", n)
	}
	if _, err := h.foos.Patch(t.Context(), h.ns, "invalid", types.MergePatchType, []byte(`{"spec":{"deploymentName":"valid"}}`), client.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitAvailable("invalid", "valid", 1)
	h.waitReady("invalid", metav1.ConditionTrue, foo.ReasonDeploymentAvailable)
}
