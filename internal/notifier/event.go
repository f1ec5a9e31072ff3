package notifier

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
)

// EventType is what happened to an object, in kubewatch's words, which
// the notifier's configuration (FilterConfig.Events), metrics and messages
// use. It is the text form of cache.ChangeKind's Added, Updated and
// Deleted for the changes the notifier passes on (initial adds and
// unchanged updates are not notified).
type EventType string

// The event types, named as in kubewatch's queue and metrics.
const (
	Create EventType = "create"
	Update EventType = "update"
	Delete EventType = "delete"
)

var eventTypes = []EventType{Create, Update, Delete}

// reason is kubewatch's word for the event type: Created, Updated, Deleted.
func (t EventType) reason() string {
	switch t {
	case Create:
		return "Created"
	case Update:
		return "Updated"
	case Delete:
		return "Deleted"
	}
	return string(t)
}

// status is kubewatch's severity of the event type: Normal for a
// create, Warning for an update, Danger for a delete. Handlers pick their
// colour from it.
func (t EventType) status() string {
	switch t {
	case Create:
		return "Normal"
	case Update:
		return "Warning"
	case Delete:
		return "Danger"
	}
	return "Normal"
}

// Event is one notification. Sinks treat it as read-only: the same Event
// goes to every sink.
type Event struct {
	Type EventType
	// Kind and APIVersion of the object (for a custom resource, Kind is
	// its plural resource name, as in kubewatch).
	Kind, APIVersion string
	// Resource is the config name of what was watched: a built-in
	// resource's canonical name or a custom resource's plural.
	Resource        string
	Namespace, Name string
	// UID and ResourceVersion of the object's state notified.
	UID, ResourceVersion string
	// Labels are the object's labels.
	Labels map[string]string
	// Object is the object's new state (create, update) or its last known
	// state (delete), as JSON-like values, with Secret data redacted. It
	// is nil for a delete that happened while the notifier was down.
	Object map[string]any
	// OldObject is the state before an update, redacted like Object; nil
	// for creates and deletes, and for an update that happened while the
	// notifier was down.
	OldObject map[string]any
	// Changes are the changed field paths of an update, sorted
	// (e.g. data.key, spec.containers[0].image, metadata.labels.app). An
	// update made while the notifier was down names the top-level fields
	// that changed (data, spec, metadata, ...).
	Changes []string
	// Cluster is the configured cluster name, "" if none.
	Cluster string
	// Time is when the notifier saw the change.
	Time time.Time
	// Test marks the event of `config test`: reason Tested.
	Test bool
	// Explanation says why the object needs attention (Pods, workloads,
	// Events; nil for other kinds). Incident sinks send it.
	Explanation *Explanation
	// Incident is the incident the change belongs to, as the sink sees
	// it (nil unless the sink sets incidents). A resolve is an event of
	// its own, with Object nil.
	Incident *Incident

	// tr and pend track the event for the checkpoint (nil: untracked).
	tr   *tracker
	pend *pending
	// resolve tracks a resolve through the sinks (nil: not a resolve).
	resolve *resolveRefs
	// logs fetches the failed container's log once for every sink (nil:
	// not asked for).
	logs *lazyLogs
}

// severity is the event's derived severity (info without explanation).
func (e *Event) severity() string {
	if e.Explanation == nil {
		return SeverityInfo
	}
	return e.Explanation.Severity
}

// hold is called by a sink that takes the event, before it queues it.
func (e *Event) hold() {
	e.pend.hold()
	if e.resolve != nil {
		e.resolve.n.Add(1)
	}
}

// finish is called by a sink that took the event once it is through with
// it: delivered, or given up on (delivered true), or dropped by a stop
// (false: the next start sends it again).
func (e *Event) finish(delivered bool) {
	e.tr.finish(e.pend, delivered)
	if e.resolve != nil {
		e.resolve.finish(delivered)
	}
}

// carried is called by a sink that merged the event into a later one of
// its object instead of sending it (see overflow).
func (e *Event) carried() {
	e.tr.carry(e.pend)
	e.tr.finish(e.pend, true)
}

// Reason is kubewatch's reason: Created, Updated, Deleted (Tested for the
// event of `config test`).
func (e *Event) Reason() string {
	if e.Test {
		return "Tested"
	}
	return e.Type.reason()
}

// Status is kubewatch's severity: Normal, Warning or Danger.
func (e *Event) Status() string {
	if e.Test {
		return "Normal"
	}
	return e.Type.status()
}

// Message is kubewatch's text, byte for byte:
//
//	A `Pod` in namespace `default` has been `Created`:
//	`nginx`
//
// A cluster-scoped object has an empty namespace (“), as in kubewatch.
// With a cluster name it is prefixed as kubewatch's KUBEWATCH_NAME did:
// "`prod` - A `Pod` ...".
func (e *Event) Message() string {
	var b strings.Builder
	if e.Cluster != "" {
		fmt.Fprintf(&b, "`%s` - ", e.Cluster)
	}
	fmt.Fprintf(&b, "A `%s` in namespace `%s` has been `%s`:\n`%s`", e.Kind, e.Namespace, e.Reason(), e.Name)
	return b.String()
}

// maxChanges bounds the field paths reported for one update.
const maxChanges = 50

// ignoredPaths change with every write (or are not the object's content),
// so they are no change worth reporting.
var ignoredPaths = map[string]bool{
	"metadata.resourceVersion": true,
	"metadata.generation":      true,
	"metadata.managedFields":   true,
}

// diff returns the sorted paths of the fields that differ between old and
// new (JSON-like values), ignoring resourceVersion, generation and
// managedFields. Maps are descended into; a list is reported by index when
// both sides have the same length, else as a whole. Keys that are not
// plain identifiers are quoted: metadata.labels["app.kubernetes.io/name"].
// At most 50 paths are returned, the last being "..." when there were more.
func diff(old, new map[string]any) []string {
	return capChanges(diffAll(old, new))
}

// diffAll is diff without the cap.
func diffAll(old, new map[string]any) []string {
	var out []string
	diffValue("", old, new, &out)
	sort.Strings(out)
	return out
}

// capChanges keeps the first maxChanges-1 paths and "..." when there are
// more than maxChanges.
func capChanges(paths []string) []string {
	if len(paths) > maxChanges {
		return append(paths[:maxChanges-1:maxChanges-1], "...")
	}
	return paths
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func diffValue(path string, a, b any, out *[]string) {
	if ignoredPaths[path] {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			bv, ok := bm[k]
			if !ok {
				if !ignoredPaths[joinPath(path, k)] {
					*out = append(*out, joinPath(path, k))
				}
				continue
			}
			diffValue(joinPath(path, k), av, bv, out)
		}
		for k := range bm {
			if _, ok := am[k]; !ok && !ignoredPaths[joinPath(path, k)] {
				*out = append(*out, joinPath(path, k))
			}
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diffValue(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}

// onlyUnder reports whether every path is prefix itself or below it.
func onlyUnder(paths []string, prefix string) bool {
	for _, p := range paths {
		if p != prefix && !strings.HasPrefix(p, prefix+".") && !strings.HasPrefix(p, prefix+"[") {
			return false
		}
	}
	return len(paths) > 0
}

// Redacted is what replaces each value of a Secret's data and stringData;
// under data it is base64-encoded, as data values are.
const Redacted = "[redacted]"

var redactedBase64 = base64.StdEncoding.EncodeToString([]byte(Redacted))

// lastApplied is where kubectl apply keeps the applied manifest: for a
// Secret, its data and stringData in plain JSON.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// redactSecret returns obj with the values of data and stringData, and the
// last-applied-configuration annotation, replaced, keeping the keys. obj
// itself is not changed.
func redactSecret(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		if ann, ok := meta["annotations"].(map[string]any); ok {
			if _, ok := ann[lastApplied]; ok {
				a := make(map[string]any, len(ann))
				for k, v := range ann {
					a[k] = v
				}
				a[lastApplied] = Redacted
				m := make(map[string]any, len(meta))
				for k, v := range meta {
					m[k] = v
				}
				m["annotations"] = a
				out["metadata"] = m
			}
		}
	}
	for field, repl := range map[string]string{"data": redactedBase64, "stringData": Redacted} {
		m, ok := obj[field].(map[string]any)
		if !ok {
			continue
		}
		r := make(map[string]any, len(m))
		for k := range m {
			r[k] = repl
		}
		out[field] = r
	}
	return out
}
