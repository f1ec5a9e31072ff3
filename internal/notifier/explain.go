package notifier

import (
	"fmt"
	"strings"
)

// Severities, derived from the object (see explain): a route
// (FilterConfig.Severity) passes a change of at least its severity.
const (
	SeverityInfo    = "info"
	SeverityWarning = "warning"
	SeverityFailed  = "failed"
)

// Explanation says why an object needs attention: for a Pod, the failed
// container's reason, exit code, restarts and the owning workload; for a
// workload, its failed condition and replicas. Incident sinks send it.
type Explanation struct {
	// Reason is the most telling of OOMKilled, CrashLoopBackOff,
	// ImagePullBackOff, ErrImagePull, Evicted, Unschedulable, Error, a
	// workload's failed condition's reason (ProgressDeadlineExceeded),
	// Pending, NotReady; "" when healthy.
	Reason string `json:"reason,omitempty"`
	// Message is the message that goes with it (the scheduler's, the
	// kubelet's, the condition's).
	Message string `json:"message,omitempty"`
	// Container is the container the reason is about; ExitCode its last
	// termination's code (nil if none); Restarts its restart count.
	Container string `json:"container,omitempty"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Restarts  int    `json:"restarts,omitempty"`
	// TerminationReason is the reason of the container's last
	// termination (OOMKilled, Error), the cause of a CrashLoopBackOff.
	TerminationReason string `json:"terminationReason,omitempty"`
	// Owner is the controlling workload, "Kind/name" (a Deployment for a
	// Pod of a Deployment's ReplicaSet).
	Owner string `json:"owner,omitempty"`
	// Replicas of a workload: "ready/desired".
	Replicas string `json:"replicas,omitempty"`
	// Logs are the last lines of the failed container's previous log
	// (redacted), when asked for (incidents.loglines) and obtainable;
	// LogsUnavailable says why there are none when they were asked for.
	Logs            []string `json:"logs,omitempty"`
	LogsUnavailable string   `json:"logsUnavailable,omitempty"`
	// Healthy: the object needs no attention.
	Healthy  bool   `json:"healthy"`
	Severity string `json:"severity"`
}

// failedReasons are the reasons of severity failed.
var failedReasons = map[string]bool{
	"OOMKilled": true, "CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true,
	"Evicted": true, "Unschedulable": true, "Error": true, "Failed": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "InvalidImageName": true, "ProgressDeadlineExceeded": true, "ReplicaFailure": true,
	"ContainerCannotRun": true, "DeadlineExceeded": true, "BackoffLimitExceeded": true,
}

// explain derives the explanation of an object of kind in its JSON-like
// form. Kinds without a notion of health are healthy; a Warning Event is
// of severity warning (an event never becomes healthy, so it holds no
// incident open).
func explain(kind string, obj map[string]any) *Explanation {
	e := &Explanation{Healthy: true}
	switch kind {
	case "Pod":
		explainPod(obj, e)
	case "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "ReplicationController":
		explainWorkload(kind, obj, e)
	case "Job":
		for _, c := range flist(obj, "status", "conditions") {
			if fstr(c, "type") == "Failed" && fstr(c, "status") == "True" {
				e.Healthy, e.Reason, e.Message = false, orDefault(fstr(c, "reason"), "Failed"), fstr(c, "message")
			}
		}
	case "Event":
		if fstr(obj, "type") == "Warning" {
			e.Severity = SeverityWarning
			e.Reason, e.Message = fstr(obj, "reason"), cmpOr(fstr(obj, "message"), fstr(obj, "note"))
		}
	}
	if owner := controllerOf(obj); owner != "" {
		e.Owner = owner
	}
	if e.Severity == "" {
		switch {
		case failedReasons[e.Reason] || (!e.Healthy && failedReasons[e.TerminationReason]):
			e.Severity = SeverityFailed
		case !e.Healthy:
			e.Severity = SeverityWarning
		default:
			e.Severity = SeverityInfo
		}
	}
	return e
}

func explainPod(obj map[string]any, e *Explanation) {
	phase := fstr(obj, "status", "phase")
	switch phase {
	case "Succeeded":
		return
	case "Failed":
		e.Healthy, e.Reason, e.Message = false, orDefault(fstr(obj, "status", "reason"), "Failed"), fstr(obj, "status", "message")
	}
	ready := false
	for _, c := range flist(obj, "status", "conditions") {
		switch {
		case fstr(c, "type") == "PodScheduled" && fstr(c, "status") == "False" && e.Reason == "":
			e.Healthy, e.Reason, e.Message = false, orDefault(fstr(c, "reason"), "Unschedulable"), fstr(c, "message")
		case fstr(c, "type") == "Ready" && fstr(c, "status") == "True":
			ready = true
		}
	}
	// The container that tells most: a waiting or terminated reason, the
	// most restarts.
	var best map[string]any
	bestScore := -1
	for _, c := range append(flist(obj, "status", "initContainerStatuses"), flist(obj, "status", "containerStatuses")...) {
		score := fnum(c, "restartCount")
		if fstr(c, "state", "waiting", "reason") != "" || fstr(c, "state", "terminated", "reason") != "" {
			score += 1 << 20
		}
		if failedReasons[containerReason(c)] {
			score += 1 << 21
		}
		if score > bestScore && (containerReason(c) != "" || fnum(c, "restartCount") > 0) {
			best, bestScore = c, score
		}
	}
	if best != nil {
		e.Container = fstr(best, "name")
		e.Restarts = fnum(best, "restartCount")
		if r := containerReason(best); r != "" && (e.Reason == "" || e.Reason == "Failed") {
			e.Reason = r
			e.Message = cmpOr(fstr(best, "state", "waiting", "message"), fstr(best, "state", "terminated", "message"))
		}
		// The termination that tells why it is down or restarts.
		t, ok := fget(best, "state", "terminated").(map[string]any)
		if !ok {
			t, ok = fget(best, "lastState", "terminated").(map[string]any)
		}
		if ok {
			code := fnum(t, "exitCode")
			e.ExitCode = &code
			if lr := fstr(t, "reason"); lr != "Completed" {
				e.TerminationReason = lr
			}
		}
		if failedReasons[e.Reason] || (e.Reason != "" && failedReasons[e.TerminationReason]) {
			e.Healthy = false
		}
	}
	switch {
	case !e.Healthy:
	case phase == "Pending":
		e.Healthy, e.Reason = false, cmpOr(e.Reason, "Pending")
	case phase == "Running" && !ready:
		e.Healthy, e.Reason = false, cmpOr(e.Reason, "NotReady")
	}
}

// containerReason is a container status's waiting or terminated reason
// (a terminated Completed is none).
func containerReason(c map[string]any) string {
	if r := fstr(c, "state", "waiting", "reason"); r != "" && r != "ContainerCreating" && r != "PodInitializing" {
		return r
	}
	if r := fstr(c, "state", "terminated", "reason"); r != "" && r != "Completed" {
		return r
	}
	return ""
}

func explainWorkload(kind string, obj map[string]any, e *Explanation) {
	desired := 1
	if v, ok := fget(obj, "spec", "replicas").(int64); ok {
		desired = int(v)
	} else if f, ok := fget(obj, "spec", "replicas").(float64); ok {
		desired = int(f)
	}
	readyKey := "readyReplicas"
	if kind == "DaemonSet" {
		desired = fnum(obj, "status", "desiredNumberScheduled")
		readyKey = "numberReady"
	}
	ready := fnum(obj, "status", readyKey)
	e.Replicas = fmt.Sprintf("%d/%d", ready, desired)
	for _, c := range flist(obj, "status", "conditions") {
		typ, status := fstr(c, "type"), fstr(c, "status")
		if (typ == "Progressing" && status == "False") || (typ == "ReplicaFailure" && status == "True") {
			e.Healthy, e.Reason, e.Message = false, orDefault(fstr(c, "reason"), typ), fstr(c, "message")
			return
		}
	}
	if ready < desired {
		e.Healthy, e.Reason = false, "NotReady"
		e.Message = fmt.Sprintf("%d of %d replicas ready", ready, desired)
	}
}

// controllerOf is the controlling owner of obj as "Kind/name": a
// ReplicaSet made by a Deployment (its name is the Deployment's name, a
// dash and the pod-template-hash label the Pod carries) stands for that
// Deployment, since a rollout replaces ReplicaSets.
func controllerOf(obj map[string]any) string {
	for _, o := range flist(obj, "metadata", "ownerReferences") {
		if c, _ := o["controller"].(bool); !c {
			continue
		}
		kind, name := fstr(o, "kind"), fstr(o, "name")
		if kind == "ReplicaSet" {
			if hash := fstr(obj, "metadata", "labels", "pod-template-hash"); hash != "" && strings.HasSuffix(name, "-"+hash) {
				return "Deployment/" + strings.TrimSuffix(name, "-"+hash)
			}
		}
		return kind + "/" + name
	}
	return ""
}

// get walks obj by keys; nil if a step is missing.
func fget(obj map[string]any, keys ...string) any {
	var v any = obj
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func fstr(obj map[string]any, keys ...string) string {
	s, _ := fget(obj, keys...).(string)
	return s
}

func fnum(obj map[string]any, keys ...string) int {
	switch v := fget(obj, keys...).(type) {
	case int64:
		return int(v)
	case float64:
		return int(v)
	case int:
		return v
	case int32:
		return int(v)
	}
	return 0
}

func flist(obj map[string]any, keys ...string) []map[string]any {
	l, _ := fget(obj, keys...).([]any)
	out := make([]map[string]any, 0, len(l))
	for _, v := range l {
		if m, ok := v.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
