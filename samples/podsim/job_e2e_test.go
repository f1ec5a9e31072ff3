package podsim_test

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

func job(name string, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
				},
			},
		},
	}
}

// jobCondition reports whether the Job has condition ct True.
func jobCondition(j *batchv1.Job, ct batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == ct && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestPodsim_FinishesJobPodsSoTheJobControllerCompletesOrFailsTheJob(t *testing.T) {
	// A control plane of its own: the package's shared one has no
	// kube-controller-manager, and this needs the Job controller.
	e := testenv.StartT(t, testenv.Options{ControllerManager: true, Controllers: []string{"job-controller"}})
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "podsim-jobs")
	runPodsim(t, e, podsim.Options{Namespace: ns})
	jobs := kc.BatchV1().Jobs(ns)
	for _, j := range []*batchv1.Job{job("ok", nil), job("fails", map[string]string{podsim.ExitCodeAnnotation: "3"})} {
		if _, err := jobs.Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	await.Object(t, "Job ok Complete", jobs, "ok", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) })
	await.Object(t, "Job fails Failed", jobs, "fails", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobFailed) })

	for _, tc := range []struct {
		job   string
		phase corev1.PodPhase
		code  int32
	}{{"ok", corev1.PodSucceeded, 0}, {"fails", corev1.PodFailed, 3}} {
		pods, err := kc.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + tc.job})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 {
			t.Errorf("Job %s has %d pods, want 1", tc.job, len(pods.Items))
			continue
		}
		p := pods.Items[0]
		if p.Status.Phase != tc.phase {
			t.Errorf("Job %s's pod is %s, want %s", tc.job, p.Status.Phase, tc.phase)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Terminated == nil || c.State.Terminated.ExitCode != tc.code {
				t.Errorf("Job %s's container %s is in state %+v, want terminated with exit code %d", tc.job, c.Name, c.State, tc.code)
			}
		}
	}

	// A pod no Job owns keeps running, annotation or not.
	bare := pod("bare", "")
	bare.Annotations = map[string]string{podsim.ExitCodeAnnotation: "1"}
	if _, err := kc.CoreV1().Pods(ns).Create(t.Context(), bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Object(t, "pod bare Running", kc.CoreV1().Pods(ns), "bare", podsim.Running)
	// A pod created after it is started after podsim handled bare's
	// Running status (one watch, in order), so bare stayed Running.
	if _, err := kc.CoreV1().Pods(ns).Create(t.Context(), pod("marker", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Object(t, "pod marker Running", kc.CoreV1().Pods(ns), "marker", podsim.Running)
	p, err := kc.CoreV1().Pods(ns).Get(t.Context(), "bare", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !podsim.Running(p) {
		t.Errorf("pod bare, owned by no Job, is %s, want it left Running", p.Status.Phase)
	}
}
