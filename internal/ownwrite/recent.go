package ownwrite

import (
	"hash/maphash"
	"strconv"
)

// Write is one write as its watch event is matched: the resourceVersion
// it left the object at, and a hash of the object's namespace and name.
// Sixteen bytes and no pointers, where the three strings took some eighty
// and an allocation each: the writes a controller remembers are thousands.
// Two writes are taken for one only if they left objects at the same
// resourceVersion (one etcd revision: the same object, unless resources
// are stored in different etcds) whose names also hash alike.
type Write struct {
	rv     uint64
	object uint64
}

// seed is the process's seed of the object hash.
var seed = maphash.MakeSeed()

// WriteOf returns the write that left namespace/name at resourceVersion,
// and false when resourceVersion is not an integer (the API server's are;
// such a write is not remembered, so its event is handled as another's).
func WriteOf(namespace, name, resourceVersion string) (Write, bool) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return Write{}, false
	}
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(namespace)
	h.WriteByte('/')
	h.WriteString(name)
	return Write{rv: rv, object: h.Sum64()}, true
}

// Kept bounds the writes a Recent remembers: the watch event of a write
// normally arrives well within that many later writes; an event that
// comes later is handled as another writer's.
const Kept = 4096

// Recent remembers the latest writes, at most Kept, each with a value
// (who made it). It grows with the writes up to Kept, then forgets the
// oldest first. Not safe for concurrent use: its holder locks.
type Recent[V any] struct {
	by   map[Write]V
	ring []Write
	next int
}

// Add remembers w with v (replacing the value of a w remembered already)
// and returns the write it forgot to make room, if any.
func (r *Recent[V]) Add(w Write, v V) (forgot Write, ok bool) {
	if r.by == nil {
		r.by = make(map[Write]V)
	}
	if _, had := r.by[w]; had {
		r.by[w] = v
		return Write{}, false
	}
	if len(r.ring) < Kept {
		if len(r.ring) == cap(r.ring) {
			r.ring = append(make([]Write, 0, min(max(2*cap(r.ring), 64), Kept)), r.ring...)
		}
		r.ring = append(r.ring, w)
	} else {
		forgot, ok = r.ring[r.next], true
		delete(r.by, forgot)
		r.ring[r.next] = w
		r.next = (r.next + 1) % Kept
	}
	r.by[w] = v
	return forgot, ok
}

// Get returns the value remembered with w.
func (r *Recent[V]) Get(w Write) (V, bool) {
	v, ok := r.by[w]
	return v, ok
}

// Len is how many writes r remembers.
func (r *Recent[V]) Len() int { return len(r.by) }
