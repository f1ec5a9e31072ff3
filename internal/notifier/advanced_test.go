package notifier

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func podMap(t *testing.T, mutate func(*corev1.Pod)) map[string]any {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAdvancedFilter_PodUpdatesPassOnTransitionsOnly(t *testing.T) {
	restarts := func(n int32) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = n }
	}
	withCondition := func(n int32) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			restarts(n)(p)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
	}
	// The history of one pod: it restarts three times, with status
	// updates in between.
	history := []struct {
		name  string
		state func(*corev1.Pod)
		pass  bool
	}{
		{"start", nil, false},
		{"ready", withCondition(0), false},
		{"restart 1", restarts(1), true},
		{"status after restart 1", withCondition(1), false},
		{"restart 2", restarts(2), true},
		{"restart 3", restarts(3), true},
		{"status after restart 3", withCondition(3), false},
		{"status again", restarts(3), false},
		{"image pull back-off", func(p *corev1.Pod) {
			restarts(3)(p)
			p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}
		}, true},
		{"still in back-off", func(p *corev1.Pod) {
			withCondition(3)(p)
			p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}
		}, false},
		{"OOMKilled", func(p *corev1.Pod) {
			restarts(3)(p)
			p.Status.ContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ContainerID: "c-1"}
		}, true},
		{"its termination moved to lastState on restart", func(p *corev1.Pod) {
			restarts(3)(p)
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ContainerID: "c-1"}
		}, false},
		{"spec changed", func(p *corev1.Pod) {
			restarts(3)(p)
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ContainerID: "c-1"}
			p.Spec.Containers[0].Image = "img:2"
		}, true},
		{"evicted", func(p *corev1.Pod) {
			restarts(3)(p)
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ContainerID: "c-1"}
			p.Spec.Containers[0].Image = "img:2"
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
		}, true},
	}
	old := podMap(t, nil)
	passed := 0
	for _, h := range history[1:] {
		cur := podMap(t, h.state)
		got := advancedPass(&Event{Type: Update, Kind: "Pod", Object: cur, OldObject: old})
		if got != h.pass {
			t.Errorf("%s: pass = %v, want %v", h.name, got, h.pass)
		}
		if got {
			passed++
		}
		old = cur
	}
	if passed != 7 {
		t.Errorf("%d updates passed, want 7: 3 restarts, the back-off, the OOM kill, the spec change, the eviction", passed)
	}
	// Creates and deletes always pass; an update whose old state is
	// unknown (made while the notifier was down) is judged on its state.
	for _, ev := range []*Event{
		{Type: Create, Kind: "Pod", Object: podMap(t, nil)},
		{Type: Delete, Kind: "Pod", Object: podMap(t, nil)},
		{Type: Update, Kind: "Pod", Object: podMap(t, restarts(1))},
	} {
		if !advancedPass(ev) {
			t.Errorf("%s of a pod (old %v) did not pass", ev.Type, ev.OldObject != nil)
		}
	}
	if advancedPass(&Event{Type: Update, Kind: "Pod", Object: podMap(t, nil)}) {
		t.Error("an update of a healthy pod with no old state passed")
	}
}

func TestAdvancedFilter_EventsJobsAndOtherKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   *Event
		pass bool
	}{
		{"warning event created", &Event{Type: Create, Kind: "Event", Object: map[string]any{"type": "Warning", "reason": "BackOff"}}, true},
		{"normal event created", &Event{Type: Create, Kind: "Event", Object: map[string]any{"type": "Normal", "reason": "Pulled"}}, false},
		{"normal eviction created", &Event{Type: Create, Kind: "Event", Object: map[string]any{"type": "Normal", "reason": "Evicted"}}, true},
		{"warning event updated", &Event{Type: Update, Kind: "Event", Object: map[string]any{"type": "Warning"}}, false},
		{"job fails", &Event{Type: Update, Kind: "Job",
			OldObject: map[string]any{"spec": map[string]any{"parallelism": int64(1)}},
			Object:    map[string]any{"spec": map[string]any{"parallelism": int64(1)}, "status": map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True"}}}}}, true},
		{"failed job updated again", &Event{Type: Update, Kind: "Job",
			OldObject: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True"}}}},
			Object:    map[string]any{"status": map[string]any{"active": int64(0), "conditions": []any{map[string]any{"type": "Failed", "status": "True"}}}}}, false},
		{"job progresses", &Event{Type: Update, Kind: "Job", OldObject: map[string]any{}, Object: map[string]any{"status": map[string]any{"active": int64(1)}}}, false},
		{"job spec changes", &Event{Type: Update, Kind: "Job", OldObject: map[string]any{"spec": map[string]any{"suspend": false}}, Object: map[string]any{"spec": map[string]any{"suspend": true}}}, true},
		{"job created", &Event{Type: Create, Kind: "Job", Object: map[string]any{}}, true},
		{"configmap updated", &Event{Type: Update, Kind: "ConfigMap", Object: map[string]any{}}, true},
	} {
		if got := advancedPass(tc.ev); got != tc.pass {
			t.Errorf("%s: pass = %v, want %v", tc.name, got, tc.pass)
		}
	}
}
