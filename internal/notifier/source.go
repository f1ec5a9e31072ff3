package notifier

import (
	"maps"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop/watcher"
)

// source turns one informer's notifications into events, and, against
// the checkpoint, its initial list into what changed while the notifier
// was down.
type source struct {
	n                *Notifier
	resource         string
	kind, apiVersion string
	// scope names what the source watches in the checkpoint:
	// resource@namespace.
	scope string
	// isCheckpoint is the checkpoint's own ConfigMap, never notified
	// (nil: the source cannot see it).
	isCheckpoint func(watcher.Object) bool

	mu sync.Mutex
	// hasRestored: the checkpoint holds this scope; restored are its
	// objects not yet seen in the initial list. Without it (a first start,
	// a scope newly watched, an overflowed checkpoint) the initial list is
	// not notified.
	hasRestored bool
	restored    map[string]ckEntry
}

func (n *Notifier) newSource(resource, kind, apiVersion, namespace string, configMaps bool) *source {
	s := &source{n: n, resource: resource, kind: kind, apiVersion: apiVersion, scope: resource + "@" + namespace}
	if ck := n.cfg.Checkpoint; configMaps && ck.Type == CheckpointConfigMap {
		s.isCheckpoint = func(obj watcher.Object) bool {
			return obj.GetNamespace() == ck.Namespace && obj.GetName() == ck.Name
		}
	}
	n.sources = append(n.sources, s)
	return s
}

// restore takes the source's part of the loaded checkpoint.
func (s *source) restore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	objs, ok := s.n.tracker.restoredScope(s.scope)
	s.hasRestored, s.restored = ok, maps.Clone(objs)
	s.n.tracker.touch(s.scope)
}

func (s *source) handler() objectHandler {
	return objectHandler{add: s.add, update: s.update, del: s.del}
}

func objKey(obj watcher.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func (s *source) skip(obj watcher.Object) bool {
	return s.isCheckpoint != nil && s.isCheckpoint(obj)
}

func (s *source) add(obj watcher.Object, initial bool) {
	if s.skip(obj) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := objKey(obj)
	m := s.toMap(obj)
	entry := s.entry(obj, m)
	prev, had := s.restored[key]
	delete(s.restored, key)
	if initial && !s.hasRestored {
		s.n.m.suppressed.WithLabelValues(s.kind, "initial").Inc()
		s.record(key, entry)
		return
	}
	if had && prev.UID != string(obj.GetUID()) {
		// Deleted and made again while the notifier was down.
		s.gone(key, prev)
		had = false
	}
	if !had {
		s.n.m.events.WithLabelValues(s.kind, string(Create)).Inc()
		s.emit(Create, obj, m, nil, nil, entry)
		return
	}
	// In the checkpoint: changed while down?
	if prev.RV == obj.GetResourceVersion() {
		s.n.m.suppressed.WithLabelValues(s.kind, "initial").Inc()
		s.record(key, entry)
		return
	}
	s.n.m.events.WithLabelValues(s.kind, string(Update)).Inc()
	changes := changedFields(prev.Fields, entry.Fields)
	if reason := s.suppression(changes); reason != "" {
		s.n.m.suppressed.WithLabelValues(s.kind, reason).Inc()
		s.record(key, entry)
		return
	}
	s.emit(Update, obj, m, nil, changes, entry)
}

// suppression is why an update with these changed paths is not worth a
// notification, "" if it is.
func (s *source) suppression(changes []string) string {
	switch {
	case len(changes) == 0:
		return "noop"
	case s.n.cfg.Updates.IgnoreStatusOnly && onlyUnder(changes, "status"):
		return "status"
	case s.n.cfg.Updates.IgnoreMetadataOnly && onlyUnder(changes, "metadata"):
		return "metadata"
	}
	return ""
}

func (s *source) update(old, new watcher.Object) {
	if s.skip(new) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n.m.events.WithLabelValues(s.kind, string(Update)).Inc()
	if old.GetResourceVersion() == new.GetResourceVersion() {
		// A replay or a relist: nothing happened.
		s.n.m.suppressed.WithLabelValues(s.kind, "unchanged").Inc()
		return
	}
	nm, om := s.toMap(new), s.toMap(old)
	entry := s.entry(new, nm)
	// The policies judge every changed path; only the event's list is
	// capped (a capped list ends in "...", which is under no prefix).
	changes := diffAll(om, nm)
	if reason := s.suppression(changes); reason != "" {
		s.n.m.suppressed.WithLabelValues(s.kind, reason).Inc()
		s.record(objKey(new), entry)
		return
	}
	s.emit(Update, new, nm, om, capChanges(changes), entry)
}

func (s *source) del(obj watcher.Object, _ bool) {
	if s.skip(obj) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n.m.events.WithLabelValues(s.kind, string(Delete)).Inc()
	s.emit(Delete, obj, s.toMap(obj), nil, nil, nil)
}

// sweep notifies the deletes of the objects the checkpoint holds that the
// initial list did not: deleted while the notifier was down. It is called
// once the source's handler has taken its initial list.
func (s *source) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, prev := range s.restored {
		s.gone(key, prev)
	}
	s.restored = nil
}

// gone notifies the delete of an object known only from the checkpoint:
// its kind, namespace, name and uid, not its last state.
func (s *source) gone(key string, prev ckEntry) {
	ns, name, found := strings.Cut(key, "/")
	if !found {
		ns, name = "", key
	}
	s.n.m.events.WithLabelValues(s.kind, string(Delete)).Inc()
	ev := &Event{
		Type: Delete, Kind: s.kind, APIVersion: s.apiVersion, Resource: s.resource,
		Namespace: ns, Name: name, UID: prev.UID, ResourceVersion: prev.RV,
		Cluster: s.n.cfg.ClusterName, Time: s.n.opts.Now(),
	}
	s.send(ev, key, nil)
}

// entry is what the checkpoint keeps of obj (nil without a checkpoint).
func (s *source) entry(obj watcher.Object, m map[string]any) *ckEntry {
	if s.n.tracker == nil {
		return nil
	}
	return entryOf(string(obj.GetUID()), obj.GetResourceVersion(), m)
}

// record puts a state that is not notified into the checkpoint, after
// what is in flight for its object.
func (s *source) record(key string, entry *ckEntry) {
	if s.n.tracker == nil {
		return
	}
	s.n.tracker.finish(s.n.tracker.begin(s.scope, key, entry), true)
}

// toMap returns obj as JSON-like values. An unstructured object's own map
// is returned: it is the cache's, read-only.
func (s *source) toMap(obj watcher.Object) map[string]any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		s.n.log.Error("Converting an object", "kind", s.kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "err", err)
		m = map[string]any{"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()}}
	}
	m["kind"], m["apiVersion"] = s.kind, s.apiVersion
	return m
}

// emit notifies a change of obj; entry is its state for the checkpoint
// (nil for a delete).
func (s *source) emit(t EventType, obj watcher.Object, m, old map[string]any, changes []string, entry *ckEntry) {
	// Core Secrets, whether watched as the built-in resource or listed as
	// a custom resource (then unstructured).
	if s.apiVersion == "v1" && (s.kind == "Secret" || s.resource == "secrets") {
		m = redactSecret(m)
		if old != nil {
			old = redactSecret(old)
		}
	}
	ev := &Event{
		Type: t, Kind: s.kind, APIVersion: s.apiVersion, Resource: s.resource,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion(),
		Labels: obj.GetLabels(), Object: m, OldObject: old, Changes: changes, Cluster: s.n.cfg.ClusterName, Time: s.n.opts.Now(),
	}
	s.send(ev, objKey(obj), entry)
}

// send offers ev to every sink, tracked for the checkpoint, with its
// explanation and incident; a silenced change goes to no sink.
func (s *source) send(ev *Event, key string, entry *ckEntry) {
	s.n.log.Debug("Processing "+string(ev.Type), "kind", ev.Kind, "namespace", ev.Namespace, "name", ev.Name, "changes", ev.Changes)
	ev.Explanation = explain(ev.Kind, ev.Object)
	s.n.observe(ev)
	if tr := s.n.tracker; tr != nil {
		ev.tr, ev.pend = tr, tr.begin(s.scope, key, entry)
	}
	if sil := s.n.silencer; sil != nil {
		if why := sil.silenced(ev, s.n.opts.Now()); why != "" {
			s.n.m.suppressed.WithLabelValues(s.kind, "silenced").Inc()
			s.n.log.Debug("Silenced", "kind", ev.Kind, "namespace", ev.Namespace, "name", ev.Name, "silence", why)
			ev.finish(true)
			return
		}
	}
	for _, d := range s.n.deliveries {
		d.offer(ev)
	}
	ev.finish(true)
}
