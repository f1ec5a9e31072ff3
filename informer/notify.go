package informer

import (
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

type noteKind uint8

const (
	noteAdd noteKind = iota + 1
	noteUpdate
	noteDelete
	// noteDeleteThenAdd: the handler must hear that old went away and that
	// obj (another object under the same key) appeared, in that order.
	noteDeleteThenAdd
)

// note is one pending notification for one key: one event, or, merged,
// a delete and an add (noteDeleteThenAdd).
type note[T watcher.Object] struct {
	kind    noteKind
	old     T    // noteUpdate: the previous state; noteDelete, noteDeleteThenAdd: the deleted object
	obj     T    // noteAdd, noteUpdate, noteDeleteThenAdd: the current state
	fsu     bool // noteDelete, noteDeleteThenAdd: the delete's FinalStateUnknown
	replay  bool // noteAdd, noteDeleteThenAdd: the add's Replay; noteUpdate: the update's
	preSync bool // part of the state the registration must see before it is synced
	merged  bool // obj stands for more than one write (cache.Event.Merged)
}

// noteOf is the note of one event.
func noteOf[T watcher.Object](e cache.Event[T]) note[T] {
	switch e.Kind {
	case cache.Added:
		return note[T]{kind: noteAdd, obj: e.New, replay: e.Replay, merged: e.Merged}
	case cache.Updated:
		return note[T]{kind: noteUpdate, old: e.Old, obj: e.New, replay: e.Replay, merged: e.Merged}
	default:
		return note[T]{kind: noteDelete, old: e.Old, fsu: e.FinalStateUnknown}
	}
}

// merge folds n, the newer notification, into p, the pending one for the
// same key, so the handler sees the same end state in fewer calls. keep is
// false when the two cancel out (an add the handler never saw, then its
// delete).
func merge[T watcher.Object](p, n note[T]) (_ note[T], keep bool) {
	out := n
	switch p.kind {
	case noteAdd:
		switch n.kind {
		case noteDelete:
			return note[T]{}, false
		case noteUpdate, noteAdd:
			out = note[T]{kind: noteAdd, obj: n.obj, replay: p.replay}
		case noteDeleteThenAdd:
			out = note[T]{kind: noteAdd, obj: n.obj, replay: n.replay}
		}
	case noteUpdate:
		switch n.kind {
		case noteUpdate, noteAdd:
			// Still a replay only if nothing but replays was merged.
			out = note[T]{kind: noteUpdate, old: p.old, obj: n.obj, replay: p.replay && n.replay}
		case noteDelete:
			out = n
		case noteDeleteThenAdd:
			out = n
		}
	case noteDelete:
		switch n.kind {
		case noteAdd:
			out = note[T]{kind: noteDeleteThenAdd, old: p.old, fsu: p.fsu, obj: n.obj, replay: n.replay}
		case noteUpdate, noteDeleteThenAdd:
			out = note[T]{kind: noteDeleteThenAdd, old: p.old, fsu: p.fsu, obj: n.obj, replay: n.replay && n.kind != noteUpdate}
		case noteDelete:
			out = p // the handler knows only p's object; a second delete adds nothing
		}
	case noteDeleteThenAdd:
		switch n.kind {
		case noteAdd, noteUpdate, noteDeleteThenAdd:
			out = note[T]{kind: noteDeleteThenAdd, old: p.old, fsu: p.fsu, obj: n.obj, replay: p.replay}
		case noteDelete:
			out = note[T]{kind: noteDelete, old: p.old, fsu: p.fsu}
		}
	}
	out.preSync = p.preSync || n.preSync
	// Two notes of an object became one: whatever it delivers stands for
	// more than one write.
	out.merged = out.kind != noteDelete
	return out, true
}

// listenerQueue is one registration's pending notifications: a keyedFIFO of
// merged notes plus the bookkeeping of its synced signal. Plain data; the
// listener locks around it.
//
// A key that changes again while it is queued keeps its place in line (the
// change merges into the queued note), as in client-go's delta queue. So a
// queued key is delivered after at most the notes that were queued ahead of
// it when it entered the queue, however often it, or any other key, changes
// meanwhile. Moving it to the back instead would let a key that changes
// faster than a slow handler drains its queue wait for ever.
//
// A snapshot's events that arrive while the queue is empty (the first
// snapshot, the cache replayed to a new registration) are not copied into
// the keyed queue: the queue keeps the snapshot's slice, which every
// registration shares, and walks it ahead of anything queued later. A key
// that changes while its snapshot event waits is then queued behind the
// snapshot rather than merged into it, so the handler sees that change as
// its own notification. That saves a queue entry per object, at the time
// the process holds the most: the whole snapshot has just been stored.
type listenerQueue[T watcher.Object] struct {
	fifo    keyedFIFO[note[T]]
	marked  bool // the registration's initial state has been queued
	preSync int  // notes of that initial state not yet delivered
	// batch[next:] are a snapshot's events not yet delivered; shared, so
	// never written. batchPreSync: they are part of the initial state.
	batch        []cache.Event[T]
	next         int
	batchPreSync bool
	// keys, instead of batch: the objects of an encoded cache that a
	// snapshot added or a periodic replay re-delivers, read from the
	// cache as they are delivered (see listener.resolve); keysKind is
	// their notes' kind (noteAdd or, for a periodic replay, noteUpdate)
	// and keysReplay their Replay.
	keys       []cache.Key
	keysKind   noteKind
	keysReplay bool
}

// pushKeys queues notes of kind (noteAdd, or noteUpdate for a periodic
// replay) for keys as one batch if the queue is idle, and reports whether
// it did.
func (q *listenerQueue[T]) pushKeys(keys []cache.Key, kind noteKind, replay bool) bool {
	if q.len() != 0 {
		return false
	}
	q.keys, q.next, q.keysKind, q.keysReplay, q.batchPreSync = keys, 0, kind, replay, false
	return true
}

// batchMin is the smallest snapshot kept as a batch; smaller ones are
// queued key by key.
const batchMin = 64

// pushAll queues a snapshot's events, in order.
func (q *listenerQueue[T]) pushAll(events []cache.Event[T]) {
	if len(events) >= batchMin && q.len() == 0 {
		q.batch, q.next, q.batchPreSync = events, 0, false
		return
	}
	q.fifo.reserve(len(events))
	for _, e := range events {
		q.push(e.Key(), noteOf(e))
	}
}

func (q *listenerQueue[T]) push(k cache.Key, n note[T]) {
	p, ok := q.fifo.get(k)
	if !ok {
		q.fifo.push(k, n)
		return
	}
	m, keep := merge(p, n)
	if !keep {
		if p.preSync {
			q.preSync--
		}
		q.fifo.remove(k)
		return
	}
	q.fifo.set(k, m)
}

// mark records that everything queued so far is the initial state the
// registration must deliver before it counts as synced.
func (q *listenerQueue[T]) mark() {
	if q.marked {
		return
	}
	q.marked = true
	if rest := q.batchLen(); rest > 0 && !q.batchPreSync {
		q.batchPreSync = true
		q.preSync += rest
	}
	q.fifo.each(func(k cache.Key, n note[T]) {
		if !n.preSync {
			n.preSync = true
			q.fifo.set(k, n)
			q.preSync++
		}
	})
}

// pop returns the next note. lazy: it is the note of key from a batch of
// keys, whose object the caller reads (listener.resolve).
func (q *listenerQueue[T]) pop() (n note[T], key cache.Key, lazy, ok bool) {
	if q.next < len(q.keys) {
		key = q.keys[q.next]
		n = note[T]{kind: q.keysKind, replay: q.keysReplay, preSync: q.batchPreSync}
		q.next++
		if q.next == len(q.keys) {
			q.keys, q.next = nil, 0
		}
		return n, key, true, true
	}
	if q.next < len(q.batch) {
		n = noteOf(q.batch[q.next])
		n.preSync = q.batchPreSync
		q.next++
		if q.next == len(q.batch) {
			q.batch, q.next = nil, 0
		}
		return n, cache.Key{}, false, true
	}
	_, n, ok = q.fifo.pop()
	return n, cache.Key{}, false, ok
}

// batchLen is the number of batched notes not yet delivered.
func (q *listenerQueue[T]) batchLen() int { return len(q.batch) + len(q.keys) - q.next }

// delivered records that n's callbacks returned.
func (q *listenerQueue[T]) delivered(n note[T]) {
	if n.preSync {
		q.preSync--
	}
}

func (q *listenerQueue[T]) synced() bool { return q.marked && q.preSync == 0 }

func (q *listenerQueue[T]) len() int { return q.batchLen() + q.fifo.len() }
