package client

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/ownwrite"
	"github.com/kloop-dev/kloop/internal/rvorder"
)

// writeTracker remembers, per resource and key, the resourceVersion of the
// latest write a client made that no cache reader has confirmed yet. A Client
// records into its own tracker; CachedReaders consult it and clear the
// entries their cache has caught up with. It is safe for concurrent use, and
// a nil *writeTracker records nothing and has nothing pending.
//
// Memory is one entry per key written that no CachedReader of that resource
// has seen its cache reach: each read through a CachedReader drops every
// pending write of its resource at or before its cache's resourceVersion
// (Seen), whichever key it reads, so a write never read back stays only
// until the next read of its resource after its cache caught up. Deletes
// confirmed without a resourceVersion stay until a read of their key or
// namespace. A client whose writes are never read through a cache should
// set Options.DisableWriteTracking.
type writeTracker struct {
	log *slog.Logger

	mu      sync.Mutex
	pending map[schema.GroupResource]map[cache.Key]pendingWrite
	// swept is, per resource with writes pending, the cache
	// resourceVersion of the last Seen that swept them.
	swept map[schema.GroupResource]string

	// own holds the latest writes at a resourceVersion, for Wrote: unlike
	// pending, an entry stays after a cache has seen it, so that every
	// watch event of the write can be told to be this client's.
	own ownwrite.Recent[struct{}]
	// spans holds the span of each traced write among own, for the
	// reconcile its watch event wakes to link to (made on the first).
	spans map[ownwrite.Write]spanRef
}

// spanRef is a write's span, kept small.
type spanRef struct {
	trace trace.TraceID
	span  trace.SpanID
	flags trace.TraceFlags
}

// pendingWrite is a write a cache may not have seen yet: either a write at a
// ResourceVersion, or a delete the server confirmed without returning the
// object (Gone), which a cache has seen once it no longer holds the object
// with UID under Key.
type pendingWrite struct {
	Key             cache.Key
	ResourceVersion string    // "" when Gone
	Gone            bool      // a completed delete with no resourceVersion to wait for
	UID             types.UID // with Gone: the deleted object's UID, "" when unknown
	// Controller is the UID of the written object's controller (its owner
	// reference with controller true), "" for none, when ControllerKnown:
	// a write recorded with its object (RecordObject).
	Controller      types.UID
	ControllerKnown bool
}

// newWriteTracker returns an empty tracker; each Client makes its own.
// logger receives a warning for each
// resourceVersion that is not an integer (nil means slog.Default()).
func newWriteTracker(logger *slog.Logger) *writeTracker {
	if logger == nil {
		logger = slog.Default()
	}
	return &writeTracker{log: logger, pending: make(map[schema.GroupResource]map[cache.Key]pendingWrite)}
}

// Record notes that key of resource gr was written at resourceVersion rv.
// An older rv than one already pending for key is ignored. A resourceVersion
// that is not an integer cannot be compared with a cache's, so it is not
// recorded (reads of key then do not wait) and a warning is logged.
func (t *writeTracker) Record(gr schema.GroupResource, key cache.Key, rv string) {
	t.record(gr, pendingWrite{Key: key, ResourceVersion: rv})
}

// RecordObject notes that obj, of resource gr, was written as it is (its
// resourceVersion is the write's), and who its controller is, so that
// CachedReader.ListControlledBy waits only for the writes that can change
// its answer. A resourceVersion that is not an integer is treated as by
// Record.
func (t *writeTracker) RecordObject(gr schema.GroupResource, obj metav1.Object) {
	w := pendingWrite{Key: cache.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, ResourceVersion: obj.GetResourceVersion(), ControllerKnown: true}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		w.Controller = ref.UID
	}
	t.record(gr, w)
}

// record puts w, a write at a resourceVersion, unless that is not an
// integer (then it warns).
func (t *writeTracker) record(gr schema.GroupResource, w pendingWrite) {
	if t == nil {
		return
	}
	t.remember(w.Key.Namespace, w.Key.Name, w.ResourceVersion)
	if _, err := resourceversion.CompareResourceVersion(w.ResourceVersion, w.ResourceVersion); err != nil {
		t.log.Warn("resourceVersion is not an integer; reads of this write will not wait for the cache",
			"resource", gr.String(), "namespace", w.Key.Namespace, "name", w.Key.Name, "rv", w.ResourceVersion)
		return
	}
	t.put(gr, w)
}

// RecordGone notes that key of resource gr was deleted, with no
// resourceVersion known (the API server answered the delete with a Status):
// a cache has seen it when it no longer holds an object with uid under key
// (any object, when uid is "").
func (t *writeTracker) RecordGone(gr schema.GroupResource, key cache.Key, uid types.UID) {
	if t == nil {
		return
	}
	t.put(gr, pendingWrite{Key: key, Gone: true, UID: uid})
}

func (t *writeTracker) put(gr schema.GroupResource, w pendingWrite) {
	t.mu.Lock()
	defer t.mu.Unlock()
	byKey := t.pending[gr]
	if byKey == nil {
		byKey = make(map[cache.Key]pendingWrite)
		t.pending[gr] = byKey
	}
	// A response that arrives after a newer one must not replace it.
	if old, ok := byKey[w.Key]; ok && !old.Gone && !w.Gone && !rvorder.Before(old.ResourceVersion, w.ResourceVersion) {
		return
	}
	byKey[w.Key] = w
}

// Pending returns the pending write of key, if any.
func (t *writeTracker) Pending(gr schema.GroupResource, key cache.Key) (pendingWrite, bool) {
	if t == nil {
		return pendingWrite{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.pending[gr][key]
	return w, ok
}

// PendingIn returns the pending writes of gr in namespace ("" means all
// namespaces): deletes without a resourceVersion first, then the others
// newest first. The slice is the caller's.
func (t *writeTracker) PendingIn(gr schema.GroupResource, namespace string) []pendingWrite {
	return t.pendingWhere(gr, namespace, nil)
}

// pendingWhere is PendingIn of the writes keep (nil: all) keeps. keep runs
// under the tracker's lock: it must not call the tracker.
func (t *writeTracker) pendingWhere(gr schema.GroupResource, namespace string, keep func(pendingWrite) bool) []pendingWrite {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	var out []pendingWrite
	for k, w := range t.pending[gr] {
		if (namespace == "" || k.Namespace == namespace) && (keep == nil || keep(w)) {
			out = append(out, w)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b pendingWrite) int {
		if a.Gone != b.Gone {
			if a.Gone {
				return -1
			}
			return 1
		}
		c, _ := resourceversion.CompareResourceVersion(b.ResourceVersion, a.ResourceVersion)
		return cmp.Or(c, cmp.Compare(a.Key.Namespace, b.Key.Namespace), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return out
}

// remember notes the write that left namespace/name at rv for Wrote,
// forgetting the oldest beyond ownwrite.Kept.
func (t *writeTracker) remember(namespace, name, rv string) {
	w, ok := ownwrite.WriteOf(namespace, name, rv)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if forgot, ok := t.own.Add(w, struct{}{}); ok {
		delete(t.spans, forgot)
	}
}

// rememberSpan notes sc as the span of the write that left
// namespace/name at rv, recorded already (remember).
func (t *writeTracker) rememberSpan(namespace, name, rv string, sc trace.SpanContext) {
	if t == nil || !sc.IsValid() {
		return
	}
	w, ok := ownwrite.WriteOf(namespace, name, rv)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.own.Get(w); !ok {
		return
	}
	if t.spans == nil {
		t.spans = make(map[ownwrite.Write]spanRef)
	}
	t.spans[w] = spanRef{trace: sc.TraceID(), span: sc.SpanID(), flags: sc.TraceFlags()}
}

// wroteSpan returns the span of the write that left namespace/name at rv,
// if it was traced and is still remembered; an invalid SpanContext if not.
func (t *writeTracker) wroteSpan(namespace, name, rv string) trace.SpanContext {
	if t == nil {
		return trace.SpanContext{}
	}
	w, ok := ownwrite.WriteOf(namespace, name, rv)
	if !ok {
		return trace.SpanContext{}
	}
	t.mu.Lock()
	ref, ok := t.spans[w]
	t.mu.Unlock()
	if !ok {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: ref.trace, SpanID: ref.span, TraceFlags: ref.flags})
}

// Wrote reports whether a write recorded by t, among the latest
// ownwrite.Kept, left the object namespace/name at resourceVersion rv.
func (t *writeTracker) Wrote(namespace, name, rv string) bool {
	if t == nil {
		return false
	}
	w, ok := ownwrite.WriteOf(namespace, name, rv)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok = t.own.Get(w)
	return ok
}

// Forget clears the pending write of w.Key once a cache has seen w: the
// pending write is w itself, or one at or before w.ResourceVersion. A newer
// write stays pending.
func (t *writeTracker) Forget(gr schema.GroupResource, w pendingWrite) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	byKey := t.pending[gr]
	old, ok := byKey[w.Key]
	if !ok {
		return
	}
	if old == w || (!old.Gone && !w.Gone && rvorder.AtOrAfter(w.ResourceVersion, old.ResourceVersion)) {
		delete(byKey, w.Key)
		if len(byKey) == 0 {
			delete(t.pending, gr)
			delete(t.swept, gr)
		}
	}
}

// Seen drops the pending writes of gr at or before rv, the resourceVersion
// a cache of gr has reached: a read would not wait for them. Deletes
// without a resourceVersion stay (Forget clears them). It sweeps only when
// rv differs from the last sweep's of gr, so reads of a cache that has not
// moved cost a map lookup.
func (t *writeTracker) Seen(gr schema.GroupResource, rv string) {
	if t == nil || rv == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	byKey := t.pending[gr]
	if len(byKey) == 0 || t.swept[gr] == rv {
		return
	}
	for k, w := range byKey {
		if !w.Gone && rvorder.AtOrAfter(rv, w.ResourceVersion) {
			delete(byKey, k)
		}
	}
	if len(byKey) == 0 {
		delete(t.pending, gr)
		delete(t.swept, gr)
		return
	}
	if t.swept == nil {
		t.swept = make(map[schema.GroupResource]string)
	}
	t.swept[gr] = rv
}

// Len is the number of pending writes, over all resources.
func (t *writeTracker) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, byKey := range t.pending {
		n += len(byKey)
	}
	return n
}
