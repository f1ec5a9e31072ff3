package notifier

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv"
)

// A pod that restarts three times, with status updates between and after
// the restarts: the advanced filter passes its create and the three
// restarts, nothing else.
func TestNotifier_AdvancedFilterPassesEachRestartOnceAndNoLaterStatusUpdate(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-advanced")
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recv := newReceiver(t)
	logs := &logBuffer{}
	stop := runNotifier(t, Config{Namespace: ns, Resources: []string{"pod"}, Checkpoint: CheckpointConfig{Type: CheckpointNone},
		Sinks: []SinkConfig{
			{Name: "advanced", Type: SinkWebhook, URL: recv.URL + "/advanced", AdvancedFilter: true},
			{Name: "all", Type: SinkWebhook, URL: recv.URL + "/all"},
		}}, Options{}, logs)
	defer stop()
	pods := kc.CoreV1().Pods(ns)
	p, err := pods.Create(ctx, newPod("restarter"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/all", "the create", is("Created", "Pod", "restarter"))
	seen := 1
	setStatus := func(restarts int32, ready corev1.ConditionStatus) {
		t.Helper()
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "registry.k8s.io/pause:3.10", ImageID: "x", RestartCount: restarts,
			Ready: ready == corev1.ConditionTrue}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// One update at a time: the unfiltered sink has it before the
		// next is made, so the informer merges none of them.
		seen++
		recv.waitForCount(t, "/all", seen)
	}
	setStatus(0, corev1.ConditionTrue)
	for r := int32(1); r <= 3; r++ {
		setStatus(r, corev1.ConditionFalse) // the restart
		setStatus(r, corev1.ConditionTrue)  // ready again: a status update
	}
	setStatus(3, corev1.ConditionFalse)
	setStatus(3, corev1.ConditionTrue)
	// The delete passes the filter: once it arrived, every update before
	// it has been judged (one informer, in order).
	if err := pods.Delete(ctx, "restarter", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/advanced", "the delete", is("Deleted", "Pod", "restarter"))
	var pod []string
	for _, p := range recv.payloads("/advanced") {
		if p.EventMeta.Kind == "Pod" {
			pod = append(pod, p.EventMeta.Reason)
		}
	}
	if want := []string{"Created", "Updated", "Updated", "Updated", "Deleted"}; !slices.Equal(pod, want) {
		t.Errorf("advanced sink got %q for the pod, want %q (the create and the 3 restarts); all:\n%s", pod, want, summary(recv.payloads("/advanced")))
	}

}

// waitForCount waits until path has received at least n payloads.
func (r *receiver) waitForCount(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		got, more := len(r.got[path]), r.more
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: %d payloads within 60s, want %d:\n%s", path, got, n, summary(r.payloads(path)))
		}
	}
}
