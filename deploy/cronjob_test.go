package deploy_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

const cronJobNS = "kloop-cronjob"

var (
	cronJobsGVR = schema.GroupVersionResource{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Resource: "cronjobs"}
	jobsGVR     = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// The controller's every right is exercised without waiting for a
// scheduled minute: a finished Job of the CronJob's, made by the test,
// gives it a status to write and, with a history limit of 0, a Job to
// delete; the deletion of the CronJob runs its finalizer.
func TestCronJobController_KeepsItsCronJobsAsDeploysServiceAccountWithNothingForbidden(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{ControllerManager: true, ControllerManagerFlags: []string{
		"--controllers=garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,job-controller"}})
	cs, dyn := kubernetes.NewForConfigOrDie(e.Config), dynamic.NewForConfigOrDie(e.Config)
	objs := render(t, "cronjob-controller")
	newApplier(t, e.Config).apply(t, objs)
	testwait.CRDServed(t, e.Config, "cronjobs.batch.tutorial.kubebuilder.io")
	testwait.Authorized(t, cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(cronJobNS, "cronjob-controller"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "batch.tutorial.kubebuilder.io", Resource: "cronjobs", Verb: "watch"}}, true)

	args, _, _ := containerArgs(t, find(t, objs, "Deployment", "cronjob-controller"))
	args = append(args, "--kubeconfig="+saKubeconfig(t, e, cronJobNS, "cronjob-controller"), "--leader-elect-namespace="+cronJobNS)
	p := start(t, "cronjob-controller", binary(t, "cronjob-controller"), nil, args...)
	p.stderr.WaitFor(t, "the leader's start", regexp.MustCompile(`Became the leader`))

	ns := testenv.NewNamespace(t, cs, "cronjob-e2e")
	ctx := t.Context()
	cj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
		"metadata": map[string]any{"name": "yearly", "namespace": ns},
		"spec": map[string]any{
			"schedule": "0 0 1 1 *", "successfulJobsHistoryLimit": int64(0),
			"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never", "containers": []any{map[string]any{"name": "c", "image": "busybox"}},
			}}}},
		},
	}}
	cj, err := dyn.Resource(cronJobsGVR).Namespace(ns).Create(ctx, cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, dyn, cronJobsGVR, ns, "the CronJob's finalizer", func(u *unstructured.Unstructured) bool {
		return slices.Contains(u.GetFinalizers(), "batch.tutorial.kubebuilder.io/jobs")
	})

	scheduled := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{
			"name": "yearly-done", "namespace": ns,
			"annotations": map[string]any{"batch.tutorial.kubebuilder.io/scheduled-at": scheduled},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "name": "yearly", "uid": string(cj.GetUID()),
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{"completions": int64(0), "parallelism": int64(0), "template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never", "containers": []any{map[string]any{"name": "c", "image": "busybox"}},
		}}},
	}}
	if _, err := dyn.Resource(jobsGVR).Namespace(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, dyn, cronJobsGVR, ns, "status.lastScheduleTime from the Job", func(u *unstructured.Unstructured) bool {
		got, _, _ := unstructured.NestedString(u.Object, "status", "lastScheduleTime")
		return got == scheduled
	})
	gone(t, dyn, jobsGVR, ns, "yearly-done", "the finished Job deleted (history limit 0)")

	if err := dyn.Resource(cronJobsGVR).Namespace(ns).Delete(ctx, "yearly", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, dyn, cronJobsGVR, ns, "yearly", "the CronJob gone after its finalizer")
	if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
		t.Errorf("the controller was refused something with deploy's rights: %s", p.stderr.All()[bad])
	}
}

// gone waits until the object ns/name of gvr no longer exists.
func gone(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name, what string) {
	t.Helper()
	ri := dyn.Resource(gvr).Namespace(ns)
	await.Watched(t, what, ri, metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
