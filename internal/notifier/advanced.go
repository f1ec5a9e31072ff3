package notifier

import (
	"fmt"
	"reflect"
	"strings"
)

// advancedPass is kubewatch's ADVANCED_FILTERS, judged on transitions
// where kubewatch judged on state:
//
//   - Event objects (core and events.k8s.io): only creates, and only of
//     type Warning or reason Evicted.
//   - Pods: creates and deletes pass; an update passes when the spec
//     changed, or a container's restart count went up, or a container
//     started waiting in ImagePullBackOff, or the pod became evicted, or a
//     container newly terminated OOMKilled. A pod that restarted once
//     does not pass every later update, as it does in kubewatch.
//   - Jobs: creates and deletes pass; an update passes when the spec
//     changed or the Failed condition became True.
//   - Everything else passes.
//
// An update made while the notifier was down has no old state: it is
// judged on the new state alone, as kubewatch does.
func advancedPass(ev *Event) bool {
	switch {
	case ev.Kind == "Event":
		if ev.Type != Create {
			return false
		}
		return str(ev.Object, "type") == "Warning" || str(ev.Object, "reason") == "Evicted"
	case ev.Kind == "Pod" && ev.Type == Update:
		return podTransition(ev.OldObject, ev.Object)
	case ev.Kind == "Job" && ev.Type == Update:
		return !reflect.DeepEqual(field(ev.OldObject, "spec"), field(ev.Object, "spec")) ||
			jobFailed(ev.Object) && (ev.OldObject == nil || !jobFailed(ev.OldObject))
	}
	return true
}

// podTransition reports whether new is worth a notification after old.
func podTransition(old, new map[string]any) bool {
	if old != nil && !reflect.DeepEqual(field(old, "spec"), field(new, "spec")) {
		return true
	}
	was, is := signalsOf(old), signalsOf(new)
	for c, n := range is.restarts {
		if n > was.restarts[c] {
			return true
		}
	}
	for k := range is.pullBackOff {
		if !was.pullBackOff[k] {
			return true
		}
	}
	for k := range is.oomKilled {
		if !was.oomKilled[k] {
			return true
		}
	}
	return is.evicted && !was.evicted
}

// podSignals is what the pod filter compares between two states.
type podSignals struct {
	restarts    map[string]int64 // container → restartCount
	pullBackOff map[string]bool  // containers waiting in ImagePullBackOff
	oomKilled   map[string]bool  // container and termination, OOMKilled
	evicted     bool
}

func signalsOf(pod map[string]any) podSignals {
	s := podSignals{restarts: map[string]int64{}, pullBackOff: map[string]bool{}, oomKilled: map[string]bool{}}
	if pod == nil {
		return s
	}
	status, _ := pod["status"].(map[string]any)
	for _, list := range []string{"initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"} {
		items, _ := status[list].([]any)
		for _, it := range items {
			cs, _ := it.(map[string]any)
			name := list + "/" + str(cs, "name")
			s.restarts[name] = num(cs["restartCount"])
			if str(field(field(cs, "state"), "waiting"), "reason") == "ImagePullBackOff" {
				s.pullBackOff[name] = true
			}
			for _, st := range []string{"state", "lastState"} {
				term := field(field(cs, st), "terminated")
				if str(term, "reason") == "OOMKilled" {
					// One termination, wherever it is reported: a
					// container's end moves from state to lastState
					// when it restarts.
					s.oomKilled[fmt.Sprintf("%s@%s/%s", name, str(term, "containerID"), str(term, "finishedAt"))] = true
				}
			}
		}
	}
	s.evicted = str(status, "phase") == "Failed" && str(status, "reason") == "Evicted" ||
		strings.Contains(strings.ToLower(str(status, "message")), "evicted")
	return s
}

func jobFailed(job map[string]any) bool {
	status, _ := job["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if str(cm, "type") == "Failed" && str(cm, "status") == "True" {
			return true
		}
	}
	return false
}

func field(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

func str(m map[string]any, key string) string {
	v, _ := m[key].(string)
	return v
}

func num(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}
