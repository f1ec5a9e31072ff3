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
// oldest first; a holder that knows a write's events have all been seen
// forgets it sooner (Forget), and then Recent keeps room only for what it
// holds. Not safe for concurrent use: its holder locks.
type Recent[V any] struct {
	by   map[Write]V
	ring []Write
	next int
}

// Add remembers w with v (replacing the value of a w remembered already)
// and returns the write it forgot to make room, if any (none when that one
// was forgotten already).
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
			r.ring = append(make([]Write, 0, min(max(2*cap(r.ring), firstRing), Kept)), r.ring...)
		}
		r.ring = append(r.ring, w)
	} else {
		oldest := r.ring[r.next]
		if _, had := r.by[oldest]; had {
			delete(r.by, oldest)
			forgot, ok = oldest, true
		}
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

// Forget forgets w. When that leaves no write, Recent lets go of a ring
// larger than its first (a Go map keeps its room when emptied, so the map
// goes with it); when it leaves few in a large ring, it moves them to a
// smaller ring and map: a holder that forgets the writes whose events it
// has seen holds, after a burst, only the writes still in flight, and one
// whose writes come one at a time makes no new ring for each.
func (r *Recent[V]) Forget(w Write) {
	if _, ok := r.by[w]; !ok {
		return
	}
	delete(r.by, w)
	switch {
	case len(r.by) == 0 && cap(r.ring) > firstRing:
		*r = Recent[V]{}
	case len(r.by) == 0:
		r.ring, r.next = r.ring[:0], 0
	case len(r.ring) >= shrinkFrom && len(r.by) <= len(r.ring)/8:
		r.shrink()
	}
}

const (
	// firstRing is the size of a Recent's first ring.
	firstRing = 64
	// shrinkFrom is the least ring Forget shrinks.
	shrinkFrom = 256
)

// shrink moves the writes remembered into a ring and a map of their size
// (twice it, room to grow), oldest first as before.
func (r *Recent[V]) shrink() {
	by := make(map[Write]V, len(r.by))
	ring := make([]Write, 0, max(2*len(r.by), firstRing))
	for i := range r.ring {
		w := r.ring[(r.next+i)%len(r.ring)]
		if v, ok := r.by[w]; ok {
			delete(r.by, w) // a write forgotten and added again is in the ring twice
			by[w] = v
			ring = append(ring, w)
		}
	}
	r.by, r.ring, r.next = by, ring, 0
}
