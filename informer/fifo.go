package informer

import "github.com/kloop-dev/kloop/cache"

// keyedFIFO is a queue of keys holding one value per key, in the order the
// keys entered it. Pushing a key that is already queued replaces its value
// and keeps its place, as client-go's delta queue does: a queued key is
// popped after at most the keys that were ahead of it when it entered,
// however often it or any other key changes meanwhile. (Moving it to the
// back instead would starve a key that changes faster than the consumer
// drains the queue.) Memory is bounded by the number of distinct keys, not
// by the number of changes, however slow the consumer.
//
// It is a plain data structure: no locks, no goroutines.
type keyedFIFO[V any] struct {
	order []slot // keys in push order; a slot whose gen is stale is skipped
	head  int
	items map[cache.Key]fifoItem[V]
	gen   uint64
	// peak is the most keys queued at once since items was made; hint is
	// what drained last set from it, the size the next map is made with,
	// so that a backlog like the one before (waves of changes to the same
	// objects) fills it without growing it step by step (a rehash at every
	// doubling).
	peak, hint int
}

type slot struct {
	key cache.Key
	gen uint64
}

type fifoItem[V any] struct {
	v   V
	gen uint64
}

func (q *keyedFIFO[V]) len() int { return len(q.items) }

// get returns the value queued for k.
func (q *keyedFIFO[V]) get(k cache.Key) (V, bool) {
	it, ok := q.items[k]
	return it.v, ok
}

// reserve makes room for n more keys when the queue is empty, which is
// when a snapshot's worth of keys comes at once; growing a map that holds
// entries would cost the rehash it saves.
func (q *keyedFIFO[V]) reserve(n int) {
	if len(q.items) > 0 || n < 64 {
		return
	}
	q.items = make(map[cache.Key]fifoItem[V], n)
	q.order = make([]slot, 0, n)
	q.head, q.peak = 0, 0
}

// push queues v for k at the back, or replaces the value queued for k in
// its place.
func (q *keyedFIFO[V]) push(k cache.Key, v V) { q.put(k, v, nil) }

// put is push, with the value queued for k, if any, replaced by
// merge(queued, v) rather than v (nil: by v). It looks k up once.
func (q *keyedFIFO[V]) put(k cache.Key, v V, merge func(queued, v V) V) {
	if it, ok := q.items[k]; ok {
		if merge != nil {
			v = merge(it.v, v)
		}
		it.v = v
		q.items[k] = it
		return
	}
	if q.items == nil {
		q.items = make(map[cache.Key]fifoItem[V], q.hint)
		if cap(q.order) < q.hint {
			q.order = make([]slot, 0, q.hint)
		}
	}
	q.gen++
	q.items[k] = fifoItem[V]{v: v, gen: q.gen}
	q.peak = max(q.peak, len(q.items))
	q.order = append(q.order, slot{key: k, gen: q.gen})
	q.compact()
}

// set replaces the value queued for k without moving it. k must be queued.
func (q *keyedFIFO[V]) set(k cache.Key, v V) {
	it := q.items[k]
	it.v = v
	q.items[k] = it
}

// remove drops k from the queue.
func (q *keyedFIFO[V]) remove(k cache.Key) {
	delete(q.items, k)
	q.compact()
}

// pop removes and returns the oldest entry.
func (q *keyedFIFO[V]) pop() (cache.Key, V, bool) {
	for q.head < len(q.order) {
		s := q.order[q.head]
		q.order[q.head] = slot{}
		q.head++
		if it, ok := q.items[s.key]; ok && it.gen == s.gen {
			delete(q.items, s.key)
			if len(q.items) == 0 {
				q.drained()
			} else if q.head >= 64 && q.head > len(q.order)/2 {
				n := copy(q.order, q.order[q.head:])
				clear(q.order[n:])
				q.order, q.head = q.order[:n], 0
			}
			return s.key, it.v, true
		}
	}
	q.drained()
	var zero V
	return cache.Key{}, zero, false
}

// peek returns the oldest entry without removing it.
func (q *keyedFIFO[V]) peek() (cache.Key, V, bool) {
	for ; q.head < len(q.order); q.head++ {
		s := q.order[q.head]
		if it, ok := q.items[s.key]; ok && it.gen == s.gen {
			return s.key, it.v, true
		}
		q.order[q.head] = slot{}
	}
	var zero V
	return cache.Key{}, zero, false
}

// each calls fn for every queued entry, oldest first.
func (q *keyedFIFO[V]) each(fn func(k cache.Key, v V)) {
	for _, s := range q.order[q.head:] {
		if it, ok := q.items[s.key]; ok && it.gen == s.gen {
			fn(s.key, it.v)
		}
	}
}

// drained resets an empty queue. After a large backlog (an initial list)
// it lets go of the memory, since Go maps never shrink: an idle queue should
// not hold a slot per object for the life of the informer. The next map is
// made at the backlog's peak, or half the size before if that is more
// (hint): one allocation of about the right size instead of growing from
// nothing, which a short lull in a burst (the consumer catching up once)
// does not undo; smaller backlogs after it halve it each time.
func (q *keyedFIFO[V]) drained() {
	if cap(q.order) > 1024 {
		q.order, q.items, q.hint, q.peak = nil, nil, max(q.peak, q.hint/2), 0
	} else {
		q.order = q.order[:0]
	}
	q.head = 0
}

// clear drops everything, releasing the memory of a large backlog.
func (q *keyedFIFO[V]) clear() {
	*q = keyedFIFO[V]{gen: q.gen, hint: q.hint}
}

// compact keeps order from growing with stale slots when one key is
// removed and pushed again and again, and from keeping a consumed prefix
// alive.
func (q *keyedFIFO[V]) compact() {
	pending := len(q.order) - q.head
	if pending < 64 || pending <= 2*len(q.items) {
		return
	}
	live := make([]slot, 0, len(q.items)*2)
	for _, s := range q.order[q.head:] {
		if it, ok := q.items[s.key]; ok && it.gen == s.gen {
			live = append(live, s)
		}
	}
	q.order, q.head = live, 0
}
