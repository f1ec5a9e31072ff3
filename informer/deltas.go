package informer

import (
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// deltaQueue sits between the reflector and the store. The reflector pushes
// every event as it arrives; the informer's processor pops at its own pace.
//
//   - Per key, order is kept: a key has at most one pending delta, its
//     latest state, and it keeps the place in line it took when it was
//     queued, as in client-go's DeltaFIFO. So keys are applied in the order
//     they first changed, and a key that keeps changing is applied after at
//     most the keys that were ahead of it, never starved by them.
//   - A slow consumer makes deltas coalesce instead of pile up: memory is
//     bounded by the number of distinct keys changed, plus one snapshot.
//   - Since a key's delta may carry changes newer than those of keys behind
//     it, each popped delta says how far the stream has been applied once
//     it is (op.rv): the resourceVersion just before the next key in line
//     was queued, or the latest one when nothing is left. The store records
//     that, not the object's, so its resourceVersion never claims a change
//     still waiting in line.
//   - A relist (RelistStart, RelistItem…, RelistDone) is collected as it
//     arrives, into the maps the store will hold (a cache.Snapshot), and
//     handed out as one snapshot, which supersedes every delta queued before
//     it: the store swaps it in at once and works out what changed. A
//     RelistStart in the middle of a relist starts it again (the reflector
//     restarted a listing that failed half-way).
//   - Bookmarks are handed out only when no delta is pending, so the store's
//     resourceVersion never runs ahead of its contents.
//
// It is a plain data structure: no locks, no goroutines.
type deltaQueue[T watcher.Object] struct {
	relisting bool
	relist    *cache.Snapshot[T] // the snapshot being received
	// newSnapshot makes the snapshot a relist is collected in (one that
	// suits the store, see cache.Writer.NewSnapshot); nil: a zero Snapshot.
	newSnapshot func() *cache.Snapshot[T]

	snapshot *snapshot[T] // complete snapshot not yet popped
	deltas   keyedFIFO[delta[T]]
	bookmark string // newest bookmark not yet popped
	last     string // resourceVersion of the newest event pushed

	// epoch stamps the snapshot that begins next (see Informer.Relist).
	epoch      uint64
	relistFrom uint64 // epoch of the snapshot being received
}

type snapshot[T watcher.Object] struct {
	objs  *cache.Snapshot[T]
	rv    string
	epoch uint64 // the Relist request it answers (0: none)
}

// delta is the latest state of one key: obj, or obj's deletion.
type delta[T watcher.Object] struct {
	obj     T
	deleted bool
	// after is the resourceVersion of the stream just before the key was
	// queued: once everything ahead of it is applied, the store is there.
	after string
	// merged: the delta replaced one still pending, so obj stands for more
	// than one write (cache.Event.Merged).
	merged bool
	// outOfView: the informer's filter no longer accepts obj, so applying
	// it drops the key from the cache without an event (set as applied).
	outOfView bool
}

// op is what the processor applies next.
type op[T watcher.Object] struct {
	kind     opKind
	snapshot *snapshot[T] // opSnapshot
	delta    delta[T]     // opDelta
	rv       string       // opDelta: the stream is applied up to rv once delta is
	bookmark string       // opBookmark
}

type opKind uint8

const (
	opSnapshot opKind = iota + 1
	opDelta
	opBookmark
)

// push records one event. It reports whether the event was out of protocol
// (an object event or a bookmark in the middle of a relist, or relist items
// without a start); the queue copes by dropping the unfinished relist.
func (q *deltaQueue[T]) push(ev watcher.Event[T]) (protocolError bool) {
	switch ev.Type {
	case watcher.RelistStart:
		q.relisting = true
		if q.newSnapshot != nil {
			q.relist = q.newSnapshot()
		} else {
			q.relist = &cache.Snapshot[T]{}
		}
		q.relistFrom = q.epoch
	case watcher.RelistItem:
		if !q.relisting {
			return true
		}
		q.relist.Add(ev.Object)
	case watcher.RelistDone:
		if !q.relisting {
			return true
		}
		q.snapshot = &snapshot[T]{objs: q.relist, rv: ev.ResourceVersion, epoch: q.relistFrom}
		q.relisting, q.relist = false, nil
		q.deltas.clear()
		q.bookmark = ""
		q.seen(ev.ResourceVersion)
	case watcher.Added, watcher.Modified, watcher.Deleted:
		protocolError = q.abortRelist()
		d := delta[T]{obj: ev.Object, deleted: ev.Type == watcher.Deleted, after: q.last}
		q.deltas.put(cache.KeyOf(ev.Object), d, mergeDelta[T])
		// The stream's position: the object's own resourceVersion from a
		// reflector, lower from a source that merges several streams.
		rv := ev.ResourceVersion
		if rv == "" {
			rv = ev.Object.GetResourceVersion()
		}
		q.seen(rv)
	case watcher.Bookmark:
		protocolError = q.abortRelist()
		q.bookmark = ev.ResourceVersion
		q.seen(ev.ResourceVersion)
	}
	return protocolError
}

// seen records how far the stream has come.
func (q *deltaQueue[T]) seen(rv string) {
	if rv != "" {
		q.last = rv
	}
}

func (q *deltaQueue[T]) abortRelist() bool {
	if !q.relisting {
		return false
	}
	q.relisting, q.relist = false, nil
	return true
}

// mergeDelta is d taking the place of queued, a delta of the same key
// still waiting: d keeps queued's place in line, so the stream is applied
// up to what was before queued once d is.
func mergeDelta[T watcher.Object](queued, d delta[T]) delta[T] {
	d.after, d.merged = queued.after, true
	return d
}

// pop returns the next thing to apply: the pending snapshot first, then
// deltas oldest first, then the latest bookmark.
func (q *deltaQueue[T]) pop() (op[T], bool) {
	if s := q.snapshot; s != nil {
		q.snapshot = nil
		return op[T]{kind: opSnapshot, snapshot: s}, true
	}
	if _, d, ok := q.deltas.pop(); ok {
		rv := q.last
		if _, next, ok := q.deltas.peek(); ok {
			rv = next.after
		}
		return op[T]{kind: opDelta, delta: d, rv: rv}, true
	}
	if rv := q.bookmark; rv != "" {
		q.bookmark = ""
		return op[T]{kind: opBookmark, bookmark: rv}, true
	}
	return op[T]{}, false
}

// pending is the number of deltas waiting, counting a snapshot as one.
func (q *deltaQueue[T]) pending() int {
	n := q.deltas.len()
	if q.snapshot != nil {
		n++
	}
	return n
}
