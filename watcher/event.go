package watcher

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is what kloop caches and hands to handlers: a Kubernetes API object
// with object metadata, always used through its pointer type (for example
// *corev1.ConfigMap, *unstructured.Unstructured or *metav1.PartialObjectMetadata).
type Object interface {
	runtime.Object
	metav1.Object
}

// EventType is the closed set of things a reflector reports: the steps of
// the list/watch stream, mirroring the API server's watch event types plus
// the relist markers. What those steps do to a cache is a different type,
// cache.Event (of kind Added, Updated or Deleted), which is what handlers,
// predicates and controller sources see.
type EventType uint8

const (
	// Added: the watch saw a new object.
	Added EventType = iota + 1
	// Modified: the watch saw a new version of an object.
	Modified
	// Deleted: the watch saw an object go away. Object holds its last state.
	Deleted
	// Bookmark: the server says the stream has reached ResourceVersion; no object changed.
	Bookmark
	// RelistStart: a full listing (paginated LIST or streaming watch-list) begins.
	// Every RelistItem up to the next RelistDone belongs to one consistent snapshot.
	// Items are emitted as they arrive. A RelistStart that follows a snapshot
	// without its RelistDone (a listing that failed half-way and started
	// again) begins a new snapshot: drop the items of the unfinished one.
	RelistStart
	// RelistItem: one object of the snapshot.
	RelistItem
	// RelistDone: the snapshot is complete at ResourceVersion. Consumers swap it in
	// atomically; any key they hold that the snapshot lacks was deleted while the
	// watch was down (a delete with final state unknown).
	RelistDone
)

var eventTypeNames = [...]string{"", "Added", "Modified", "Deleted", "Bookmark", "RelistStart", "RelistItem", "RelistDone"}

func (t EventType) String() string {
	if int(t) < len(eventTypeNames) && t != 0 {
		return eventTypeNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one step of the list/watch stream, in order.
//
// Object is set for Added, Modified, Deleted and RelistItem and is the zero
// value otherwise. ResourceVersion is set for Bookmark and RelistDone; for
// the object events it is how far the stream has come, which a Reflector
// sets to Object's resourceVersion (a source merging several streams may
// set it lower). Objects are owned by
// the receiver once delivered; the reflector keeps no reference.
type Event[T Object] struct {
	Type            EventType
	Object          T
	ResourceVersion string
}
