package informer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

func cm(name, uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

func ev(t watcher.EventType, o *corev1.ConfigMap) watcher.Event[*corev1.ConfigMap] {
	return watcher.Event[*corev1.ConfigMap]{Type: t, Object: o}
}

// drain pops everything, rendering each op as a string.
func drain(q *deltaQueue[*corev1.ConfigMap]) []string {
	var out []string
	for {
		o, ok := q.pop()
		if !ok {
			return out
		}
		switch o.kind {
		case opSnapshot:
			s := "snapshot@" + o.snapshot.rv + ":"
			objs := slices.SortedFunc(o.snapshot.objs.All(), func(a, b *corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
			for _, obj := range objs {
				s += " " + obj.Name + "@" + obj.ResourceVersion
			}
			out = append(out, s)
		case opDelta:
			verb := "set "
			if o.delta.deleted {
				verb = "del "
			}
			out = append(out, verb+o.delta.obj.Name+"@"+o.delta.obj.ResourceVersion)
		case opBookmark:
			out = append(out, "bookmark@"+o.bookmark)
		}
	}
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}

func TestDeltaQueue_KeepsStreamOrderWhenTheConsumerKeepsUp(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(ev(watcher.Added, cm("a", "1", "1")))
	q.push(ev(watcher.Added, cm("b", "2", "2")))
	q.push(ev(watcher.Deleted, cm("c", "3", "3")))
	equal(t, drain(&q), []string{"set a@1", "set b@2", "del c@3"})
}

func TestDeltaQueue_CoalescesAKeyToItsLatestStateAtItsFirstPosition(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(ev(watcher.Added, cm("a", "1", "1")))
	q.push(ev(watcher.Added, cm("b", "2", "2")))
	q.push(ev(watcher.Modified, cm("a", "1", "3")))
	q.push(ev(watcher.Modified, cm("b", "2", "4")))
	q.push(ev(watcher.Deleted, cm("a", "1", "5")))
	// One entry per key, its latest state, in the order the keys first
	// changed.
	equal(t, drain(&q), []string{"del a@5", "set b@4"})
}

// Keys changed again while queued keep their place in line, and each
// popped delta says how far the stream is applied once it is: never past
// a change still waiting.
func TestDeltaQueue_KeepsArrivalOrderForKeysChangedAgainWhileQueued(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(ev(watcher.Added, cm("a", "1", "1")))
	q.push(ev(watcher.Added, cm("b", "2", "2")))
	q.push(ev(watcher.Added, cm("c", "3", "3")))
	q.push(ev(watcher.Added, cm("d", "4", "4")))
	q.push(ev(watcher.Modified, cm("c", "3", "5")))
	q.push(ev(watcher.Modified, cm("a", "1", "6")))
	q.push(ev(watcher.Added, cm("e", "5", "7")))
	var got []string
	for {
		o, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, o.delta.obj.Name+"@"+o.delta.obj.ResourceVersion+" store@"+o.rv)
	}
	// After a: b's change at 2 waits, so the store is at 1 (a's first
	// change), not at 6 (a's latest); after d everything up to a@6 is in.
	equal(t, got, []string{"a@6 store@1", "b@2 store@2", "c@5 store@3", "d@4 store@6", "e@7 store@7"})
}

// A key that changes on every step while other keys keep arriving faster
// than the consumer pops is still popped: after at most the keys that were
// ahead of it when it entered the queue. Meanwhile each pop's rv is exactly
// the longest prefix of the stream that has been applied.
func TestDeltaQueue_AHotKeyIsPoppedWithinTheKeysAheadOfIt(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 3))
		var q deltaQueue[*corev1.ConfigMap]
		type entered struct{ ahead, pops int }
		waiting := map[string]entered{} // queued key → keys ahead when it entered, pops since
		var stream []string             // key of each event; its rv is its index+1
		lastSeq := map[string]int{}     // key → its newest event
		applied := map[string]int{}     // key → its newest event applied
		prefix := 0                     // events 1..prefix are all applied
		push := func(name string) {
			if _, ok := waiting[name]; !ok {
				waiting[name] = entered{ahead: q.pending()}
			}
			stream = append(stream, name)
			lastSeq[name] = len(stream)
			q.push(ev(watcher.Modified, cm(name, name, strconv.Itoa(len(stream)))))
		}
		pop := func() {
			o, ok := q.pop()
			if !ok {
				t.Fatalf("seed %d: nothing to pop with %d keys waiting", seed, len(waiting))
			}
			name := o.delta.obj.Name
			applied[name] = lastSeq[name]
			delete(waiting, name)
			for k, e := range waiting {
				e.pops++
				if e.pops > e.ahead {
					t.Fatalf("seed %d: %s still queued after %d pops; %d keys were ahead of it", seed, k, e.pops, e.ahead)
				}
				waiting[k] = e
			}
			for prefix < len(stream) && applied[stream[prefix]] > prefix {
				prefix++
			}
			if o.rv != strconv.Itoa(prefix) {
				t.Fatalf("seed %d: popped %s with store at %s; the stream is applied up to %d", seed, name, o.rv, prefix)
			}
		}
		for range 500 {
			push("hot")
			push("k" + strconv.Itoa(r.IntN(40)))
			if r.IntN(3) > 0 {
				push("k" + strconv.Itoa(r.IntN(40)))
			}
			pop()
		}
		for q.pending() > 0 {
			pop()
		}
		if prefix != len(stream) {
			t.Fatalf("seed %d: drained with the stream applied up to %d of %d", seed, prefix, len(stream))
		}
	}
}

func TestDeltaQueue_MemoryIsBoundedByDistinctKeys(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	r := rand.New(rand.NewPCG(1, 2))
	var first []string            // keys in order of first change
	latest := map[string]string{} // key → latest resourceVersion
	for i := range 100_000 {
		name := "k" + strconv.Itoa(r.IntN(50))
		if _, ok := latest[name]; !ok {
			first = append(first, name)
		}
		latest[name] = strconv.Itoa(i + 1)
		q.push(ev(watcher.Modified, cm(name, "u", latest[name])))
	}
	if q.pending() > 50 {
		t.Fatalf("%d deltas pending for 50 keys", q.pending())
	}
	if n := len(q.deltas.order) - q.deltas.head; n > 2*50+64 {
		t.Fatalf("order slice holds %d slots for 50 keys: stale slots are not compacted", n)
	}
	var want []string // each key's latest state, in order of first change
	for _, name := range first {
		want = append(want, "set "+name+"@"+latest[name])
	}
	equal(t, drain(&q), want)
}

func TestDeltaQueue_RelistIsOneSnapshotThatSupersedesEarlierDeltas(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(ev(watcher.Added, cm("old", "1", "1")))
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.Bookmark, ResourceVersion: "2"})
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart})
	q.push(ev(watcher.RelistItem, cm("a", "2", "3")))
	if o, ok := q.pop(); ok && o.kind != opDelta {
		t.Fatalf("a half-received relist was handed out: %+v", o)
	} else if !ok {
		t.Fatal("deltas queued before a relist started must still be poppable until it completes")
	}
	q.push(ev(watcher.RelistItem, cm("b", "3", "4")))
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistDone, ResourceVersion: "9"})
	q.push(ev(watcher.Modified, cm("a", "2", "10")))
	equal(t, drain(&q), []string{"snapshot@9: a@3 b@4", "set a@10"})
}

func TestDeltaQueue_DropsAnUnfinishedRelist(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart})
	q.push(ev(watcher.RelistItem, cm("partial", "1", "1")))
	// The reflector restarts a listing that failed half-way with a new
	// RelistStart: that is the protocol, not a violation of it.
	if q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart}) {
		t.Error("a relist restarted half-way was reported as out of protocol")
	}
	q.push(ev(watcher.RelistItem, cm("a", "2", "2")))
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistDone, ResourceVersion: "5"})
	equal(t, drain(&q), []string{"snapshot@5: a@2"})

	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart})
	q.push(ev(watcher.RelistItem, cm("partial", "1", "6")))
	if !q.push(ev(watcher.Added, cm("x", "3", "7"))) {
		t.Error("an object event inside a relist was not reported")
	}
	equal(t, drain(&q), []string{"set x@7"})
}

func TestDeltaQueue_HandsOutABookmarkOnlyAfterAllDeltas(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(ev(watcher.Added, cm("a", "1", "1")))
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.Bookmark, ResourceVersion: "5"})
	q.push(ev(watcher.Added, cm("b", "2", "6")))
	q.push(watcher.Event[*corev1.ConfigMap]{Type: watcher.Bookmark, ResourceVersion: "8"})
	equal(t, drain(&q), []string{"set a@1", "set b@6", "bookmark@8"})
}

// TestListenerQueue_MergedDeliveryReachesTheSameHandlerView checks the
// coalescing of a slow handler's queue against a model: whatever the
// notifications, delivering the merged queue leaves a handler that tracks
// objects by key with the same view as delivering every notification, and
// every delete it sees is of an object it had been told about.
func TestListenerQueue_MergedDeliveryReachesTheSameHandlerView(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		var q listenerQueue[*corev1.ConfigMap]
		full := map[string]string{} // view from every notification
		slow := map[string]string{} // view from the merged queue
		store := map[string]*corev1.ConfigMap{}
		rv, uid := 0, 0
		applyView := func(view map[string]string, n note[*corev1.ConfigMap], what string) {
			switch n.kind {
			case noteAdd:
				if _, ok := view[n.obj.Name]; ok {
					t.Fatalf("seed %d %s: add of %s the handler already has", seed, what, n.obj.Name)
				}
				view[n.obj.Name] = string(n.obj.UID) + "@" + n.obj.ResourceVersion
			case noteUpdate:
				if v, ok := view[n.obj.Name]; !ok || v[:len(string(n.old.UID))] != string(n.old.UID) {
					t.Fatalf("seed %d %s: update of %s the handler does not have (%q)", seed, what, n.obj.Name, v)
				}
				view[n.obj.Name] = string(n.obj.UID) + "@" + n.obj.ResourceVersion
			case noteDelete:
				if _, ok := view[n.old.Name]; !ok {
					t.Fatalf("seed %d %s: delete of %s the handler does not have", seed, what, n.old.Name)
				}
				delete(view, n.old.Name)
			case noteDeleteThenAdd:
				if _, ok := view[n.old.Name]; !ok {
					t.Fatalf("seed %d %s: delete of %s the handler does not have", seed, what, n.old.Name)
				}
				view[n.obj.Name] = string(n.obj.UID) + "@" + n.obj.ResourceVersion
			}
		}
		for range 200 {
			name := "k" + strconv.Itoa(r.IntN(4))
			rv++
			var n note[*corev1.ConfigMap]
			old, had := store[name]
			switch {
			case had && r.IntN(3) == 0:
				n = note[*corev1.ConfigMap]{kind: noteDelete, old: old, fsu: r.IntN(2) == 0}
				delete(store, name)
			case had:
				o := cm(name, string(old.UID), strconv.Itoa(rv))
				n = note[*corev1.ConfigMap]{kind: noteUpdate, old: old, obj: o}
				store[name] = o
			default:
				uid++
				o := cm(name, "u"+strconv.Itoa(uid), strconv.Itoa(rv))
				n = note[*corev1.ConfigMap]{kind: noteAdd, obj: o}
				store[name] = o
			}
			applyView(full, n, "full")
			q.push(cache.KeyOf(n.objOrOld()), n)
			if r.IntN(4) == 0 { // the slow handler gets a turn now and then
				if m, _, _, ok := q.pop(); ok {
					applyView(slow, m, "merged")
				}
			}
		}
		for {
			m, _, _, ok := q.pop()
			if !ok {
				break
			}
			applyView(slow, m, "merged")
		}
		if fmt.Sprint(full) != fmt.Sprint(slow) {
			t.Fatalf("seed %d: views differ\nfull   %v\nmerged %v", seed, full, slow)
		}
	}
}

func (n note[T]) objOrOld() T {
	if n.kind == noteDelete {
		return n.old
	}
	return n.obj
}

func TestListenerQueue_KeepsASnapshotAsOneBatchAheadOfLaterChanges(t *testing.T) {
	var q listenerQueue[*corev1.ConfigMap]
	var events []cache.Event[*corev1.ConfigMap]
	objs := map[string]*corev1.ConfigMap{}
	for i := range 100 {
		o := cm("k"+strconv.Itoa(i), "u"+strconv.Itoa(i), "1")
		objs[o.Name] = o
		events = append(events, cache.Event[*corev1.ConfigMap]{Kind: cache.Added, New: o, Replay: true})
	}
	q.pushAll(events)
	q.mark()
	// Changes to keys whose snapshot event is still queued.
	k5 := cm("k5", "u5", "2")
	q.push(cache.KeyOf(k5), note[*corev1.ConfigMap]{kind: noteUpdate, old: objs["k5"], obj: k5})
	q.push(cache.KeyOf(objs["k7"]), note[*corev1.ConfigMap]{kind: noteDelete, old: objs["k7"]})
	if q.len() != 102 {
		t.Fatalf("len %d, want 102: 100 snapshot events and 2 changes", q.len())
	}
	var got []string
	for i := 0; ; i++ {
		n, _, _, ok := q.pop()
		if !ok {
			break
		}
		if n.preSync != (i < 100) {
			t.Fatalf("notification %d: preSync %v, want it on the snapshot's only", i, n.preSync)
		}
		q.delivered(n)
		if i == 99 && !q.synced() {
			t.Fatal("not synced after the snapshot's last notification")
		}
		if i >= 98 {
			got = append(got, fmt.Sprintf("%d %s@%s", n.kind, n.objOrOld().Name, n.objOrOld().ResourceVersion))
		}
	}
	equal(t, got, []string{
		fmt.Sprintf("%d k98@1", noteAdd), fmt.Sprintf("%d k99@1", noteAdd),
		fmt.Sprintf("%d k5@2", noteUpdate), fmt.Sprintf("%d k7@1", noteDelete),
	})
	if q.len() != 0 || q.batch != nil {
		t.Fatalf("len %d, batch kept %v: a delivered snapshot is let go", q.len(), q.batch != nil)
	}
}

func TestListenerQueue_MergesASnapshotIntoNotificationsAlreadyQueued(t *testing.T) {
	var q listenerQueue[*corev1.ConfigMap]
	old := cm("k0", "u0", "1")
	q.push(cache.KeyOf(old), note[*corev1.ConfigMap]{kind: noteAdd, obj: old})
	var events []cache.Event[*corev1.ConfigMap]
	for i := range 100 {
		events = append(events, cache.Event[*corev1.ConfigMap]{Kind: cache.Updated, Old: old, New: cm("k"+strconv.Itoa(i), "u"+strconv.Itoa(i), "2")})
	}
	q.pushAll(events)
	if q.batch != nil || q.len() != 100 {
		t.Fatalf("batch %v, len %d: a snapshot joining queued notifications merges key by key (want 100 keys)", q.batch != nil, q.len())
	}
	if n, _, _, _ := q.pop(); n.kind != noteAdd || n.obj.ResourceVersion != "2" {
		t.Fatalf("first notification %d @%s, want the queued add merged with its update (add @2)", n.kind, n.obj.ResourceVersion)
	}
}

// A delta that replaced one still pending stands for several writes
// (cache.Event.Merged): another writer's change may be folded into it.
func TestDeltaQueue_MarksADeltaThatCoalescedWritesAsMerged(t *testing.T) {
	var q deltaQueue[*corev1.ConfigMap]
	q.push(ev(watcher.Modified, cm("a", "1", "3")))
	q.push(ev(watcher.Modified, cm("b", "2", "4")))
	q.push(ev(watcher.Modified, cm("b", "2", "5")))
	var got []string
	for {
		o, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, o.delta.obj.Name+"@"+o.delta.obj.ResourceVersion+" merged="+strconv.FormatBool(o.delta.merged))
	}
	equal(t, got, []string{"a@3 merged=false", "b@5 merged=true"})
}

// Two notes of a key merged into one deliver an event marked Merged; a
// note alone keeps its event's mark.
func TestMerge_MarksTheNoteOfSeveralWritesAsMerged(t *testing.T) {
	one := noteOf(cache.Event[*corev1.ConfigMap]{Kind: cache.Updated, Old: cm("a", "1", "1"), New: cm("a", "1", "2")})
	two := noteOf(cache.Event[*corev1.ConfigMap]{Kind: cache.Updated, Old: cm("a", "1", "2"), New: cm("a", "1", "3")})
	if one.merged {
		t.Error("the note of one write is marked merged")
	}
	m, keep := merge(one, two)
	if !keep || !m.merged || m.obj.ResourceVersion != "3" {
		t.Errorf("merged note %+v (keep %v), want the latest state, marked merged", m, keep)
	}
	if n := noteOf(cache.Event[*corev1.ConfigMap]{Kind: cache.Added, New: cm("a", "1", "3"), Merged: true}); !n.merged {
		t.Error("the note of a merged event lost the mark")
	}
}

func TestKeyedFIFO_MakesTheNextBacklogsMapAtTheLastOnesSizeAndLetsGoWhenIdle(t *testing.T) {
	var q keyedFIFO[int]
	key := func(i int) cache.Key { return cache.Key{Namespace: "ns", Name: "k" + strconv.Itoa(i)} }
	backlog := func(n int) {
		for i := range n {
			q.push(key(i), i)
		}
		for range n {
			if _, _, ok := q.pop(); !ok {
				t.Fatal("pop found nothing in a backlog")
			}
		}
	}
	backlog(2000)
	if q.items != nil || q.order != nil {
		t.Fatal("a drained backlog of 2000 keys still holds its memory")
	}
	if q.hint != 2000 {
		t.Fatalf("hint after a backlog of 2000 is %d, want 2000", q.hint)
	}
	// A lull within a burst (the consumer catching up once) halves it, no more.
	q.push(key(0), 0)
	q.pop()
	if q.hint != 1000 {
		t.Fatalf("hint after one key drained is %d, want 1000 (half)", q.hint)
	}
	for range 20 {
		q.push(key(0), 0)
		q.pop()
	}
	// What an idle queue keeps is bounded as before: an order of at most
	// 1024 slots and its map.
	if cap(q.order) > 1024 {
		t.Fatalf("an idle queue keeps an order of %d slots", cap(q.order))
	}
}
