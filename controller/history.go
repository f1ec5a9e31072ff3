package controller

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/cache"
)

// Bounds of the reconciles a controller keeps for Status: the latest
// RecentReconciles of all keys, and the latest keyHistoryDepth of each of
// about the keyHistoryKeys keys reconciled most recently (each worker keeps
// its share, see histories).
const (
	RecentReconciles = 20
	keyHistoryDepth  = 5
	keyHistoryKeys   = 256
)

// Outcomes of a reconcile (Reconcile.Outcome): the result labels of
// controller_runtime_reconcile_total.
const (
	OutcomeSuccess      = resultSuccess
	OutcomeError        = resultError
	OutcomeRequeueAfter = resultRequeueAfter
	OutcomeRequeue      = resultRequeue
	// OutcomeSkipped is a reconcile not run: every cause was the key's own
	// write (see Options.ReconcileOwnWrites). It is not a result of
	// controller_runtime_reconcile_total but counts in
	// kloop_controller_skipped_reconciles_total.
	OutcomeSkipped = "skipped"
)

// Reconcile is one Reconcile call as Status keeps it: when and for how
// long it ran, why (its causes) and how it ended.
type Reconcile struct {
	// Time is when it started.
	Time time.Time
	// Key is the key as text (cache.Key: "namespace/name").
	Key      string
	Duration time.Duration
	// Outcome is OutcomeSuccess, OutcomeRequeueAfter, OutcomeRequeue,
	// OutcomeError or OutcomeSkipped (then Duration is 0).
	Outcome string
	// Error is the error's message, "" unless it failed.
	Error string
	// Terminal: a TerminalError, not retried.
	Terminal bool
	// Retries is how many rate-limited retries the key had had before a
	// failed reconcile.
	Retries int
	// Causes are what woke it (see CausesFrom): the first few, and
	// CausesTotal, how many triggers were merged into it.
	Causes      []Cause
	CausesTotal int
}

// record is a Reconcile as kept: the key and the causes as they are, to
// be formatted only when someone looks.
type record[K comparable] struct {
	key      K
	start    time.Time
	dur      time.Duration
	outcome  string
	err      string
	terminal bool
	retries  int
	causes   causeSet
}

func (r *record[K]) reconcile() Reconcile {
	return Reconcile{
		Time: r.start, Key: keyString(r.key), Duration: r.dur, Outcome: r.outcome, Error: r.err,
		Terminal: r.terminal, Retries: r.retries, Causes: r.causes.list(), CausesTotal: int(r.causes.total),
	}
}

// kept is a record as a key's ring keeps it, in 96 bytes (a record of a
// cache.Key takes 240): no key (the ring's), times as int64, the first
// cause in place with its source and kind, and the outcome, as indexes
// into the history's table of names; the other kept causes as the record
// had them, shared. Only a failed record, or one whose names did not fit
// in the table, has an extra.
type kept struct {
	start, dur int64 // unix nanoseconds; nanoseconds
	// The first cause's namespace, name and resourceVersion.
	namespace, name, rv string
	total, retries      int32
	// outcome, source and kind are indexes of history.names (see name).
	outcome, source, kind uint8
	change                cache.ChangeKind
	flags                 uint8
	more                  *moreCauses
	extra                 *keptExtra
}

const (
	keptTerminal = 1 << iota
	keptReplay
	keptOwn
	keptCause // the record has a first cause
)

// keptExtra is what a kept record holds beyond its fixed size: an error,
// and the names that did not fit in the table.
type keptExtra struct {
	err                   string
	outcome, source, kind string
}

// name returns the index of s in h.names, adding it: 0 for "", i+1 for
// h.names[i]; false when the table is full (255 names, for an index in a
// uint8). Caller holds mu.
func (h *history[K]) name(s string) (uint8, bool) {
	if s == "" {
		return 0, true
	}
	for i, n := range h.names {
		if n == s {
			return uint8(i + 1), true
		}
	}
	if len(h.names) == math.MaxUint8 {
		return 0, false
	}
	h.names = append(h.names, s)
	return uint8(len(h.names)), true
}

// nameOf returns the name at index i, or over when i is 0 (a name that
// was not in the table, or ""). Caller holds mu.
func (h *history[K]) nameOf(i uint8, over string) string {
	if i == 0 {
		return over
	}
	return h.names[i-1]
}

// keep returns r as a key's ring keeps it. Caller holds mu.
func (h *history[K]) keep(r *record[K]) kept {
	k := kept{
		start: r.start.UnixNano(), dur: int64(r.dur), total: r.causes.total, retries: int32(min(r.retries, math.MaxInt32)),
		more: r.causes.more,
	}
	var extra keptExtra
	var ok bool
	if k.outcome, ok = h.name(r.outcome); !ok {
		extra.outcome = r.outcome
	}
	if r.terminal {
		k.flags |= keptTerminal
	}
	if r.causes.n > 0 {
		c := &r.causes.first
		k.flags |= keptCause
		k.namespace, k.name, k.rv, k.change = c.Namespace, c.Name, c.ResourceVersion, c.Change
		if c.Replay {
			k.flags |= keptReplay
		}
		if c.Own {
			k.flags |= keptOwn
		}
		if k.source, ok = h.name(c.Source); !ok {
			extra.source = c.Source
		}
		if k.kind, ok = h.name(c.Kind); !ok {
			extra.kind = c.Kind
		}
	}
	extra.err = r.err
	if extra != (keptExtra{}) {
		e := extra // allocated only here: &extra would put extra on the heap at every call
		k.extra = &e
	}
	return k
}

// reconcile returns k, a record of key, as Status shows it. Caller holds
// mu.
func (h *history[K]) reconcile(key K, k *kept) Reconcile {
	var extra keptExtra
	if k.extra != nil {
		extra = *k.extra
	}
	r := Reconcile{
		Time: time.Unix(0, k.start), Key: keyString(key), Duration: time.Duration(k.dur),
		Outcome: h.nameOf(k.outcome, extra.outcome), Error: extra.err,
		Terminal: k.flags&keptTerminal != 0, Retries: int(k.retries), CausesTotal: int(k.total),
	}
	if k.flags&keptCause == 0 {
		return r
	}
	n := 1
	if k.more != nil {
		n += len(k.more.kept)
	}
	r.Causes = make([]Cause, 0, n)
	r.Causes = append(r.Causes, Cause{
		Source:    h.nameOf(k.source, extra.source),
		Kind:      h.nameOf(k.kind, extra.kind),
		Namespace: k.namespace, Name: k.name, ResourceVersion: k.rv, Change: k.change,
		Replay: k.flags&keptReplay != 0, Own: k.flags&keptOwn != 0,
	})
	if k.more != nil {
		r.Causes = append(r.Causes, k.more.kept...)
	}
	return r
}

// history keeps the latest reconciles: a ring of all keys', and per key a
// ring of its own, for the most recently reconciled keys (the least
// recent key's is reused for a new key once there are keyHistoryKeys),
// whose records are kept compact (kept).
// A key's ring holds one record until the key is reconciled again: most
// keys are reconciled once in a while, and a full ring for each of them
// would hold four empty records.
type history[K comparable] struct {
	mu sync.Mutex
	// maxKeys bounds keys; 0 is keyHistoryKeys.
	maxKeys int
	recent  [RecentReconciles]record[K]
	next    int
	n       int
	keys    map[K]*keyRecords[K]
	// newest and oldest end the list of keys by their latest reconcile.
	newest, oldest *keyRecords[K]
	// names are the sources, kinds and outcomes of the kept records (see
	// name).
	names []string
}

type keyRecords[K comparable] struct {
	key K
	// ring holds the key's latest records, at most keyHistoryDepth; next
	// is where the next goes (len(ring) until it is full).
	ring         []kept
	next         int
	newer, older *keyRecords[K]
}

// add keeps r. Its causes are no longer changed by anyone, so they are
// kept as they are, shared.
func (h *history[K]) add(r *record[K]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent[h.next] = *r
	h.next = (h.next + 1) % RecentReconciles
	h.n = min(h.n+1, RecentReconciles)

	k := h.keys[r.key]
	switch {
	case k != nil:
		h.unlink(k)
	case len(h.keys) >= cmp.Or(h.maxKeys, keyHistoryKeys):
		k = h.oldest
		h.unlink(k)
		delete(h.keys, k.key)
		clear(k.ring)
		*k = keyRecords[K]{key: r.key, ring: k.ring[:0]}
		h.keys[r.key] = k
	default:
		if h.keys == nil {
			h.keys = make(map[K]*keyRecords[K])
		}
		k = &keyRecords[K]{key: r.key}
		h.keys[r.key] = k
	}
	rec := h.keep(r)
	switch {
	case len(k.ring) == keyHistoryDepth:
		k.ring[k.next] = rec
	case len(k.ring) < cap(k.ring):
		k.ring = append(k.ring, rec)
	default:
		// Room for one record, then, for a key reconciled again, for all.
		size := 1
		if len(k.ring) > 0 {
			size = keyHistoryDepth
		}
		ring := make([]kept, len(k.ring), size)
		copy(ring, k.ring)
		k.ring = append(ring, rec)
	}
	k.next = (k.next + 1) % keyHistoryDepth
	// Link it as the newest.
	k.older, k.newer = h.newest, nil
	if h.newest != nil {
		h.newest.newer = k
	}
	h.newest = k
	if h.oldest == nil {
		h.oldest = k
	}
}

func (h *history[K]) unlink(k *keyRecords[K]) {
	if k.newer != nil {
		k.newer.older = k.older
	} else {
		h.newest = k.older
	}
	if k.older != nil {
		k.older.newer = k.newer
	} else {
		h.oldest = k.newer
	}
	k.newer, k.older = nil, nil
}

// list returns the latest reconciles, newest first.
func (h *history[K]) list() []Reconcile {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Reconcile, 0, h.n)
	for i := 1; i <= h.n; i++ {
		out = append(out, h.recent[(h.next-i+RecentReconciles)%RecentReconciles].reconcile())
	}
	return out
}

// byKey returns the latest reconciles of each key kept, newest first, by
// key as text.
func (h *history[K]) byKey() map[string][]Reconcile {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]Reconcile, len(h.keys))
	for _, k := range h.keys {
		n := len(k.ring)
		rs := make([]Reconcile, 0, n)
		for i := 1; i <= n; i++ {
			rs = append(rs, h.reconcile(k.key, &k.ring[(k.next-i+n)%n]))
		}
		out[keyString(k.key)] = rs
	}
	return out
}

// histories are a controller's histories, one per worker: each worker keeps
// the records of its own reconciles, so that workers reconciling side by
// side neither wait for one lock nor pass the memory the records go to
// back and forth between their cores (with two workers that was most of
// what a reconcile cost; BENCHMARKS.md, events). Each keeps its share of
// keyHistoryKeys, and reads merge them.
type histories[K comparable] []*history[K]

// minShareKeys is the fewest keys a worker's history keeps.
const minShareKeys = 32

func newHistories[K comparable](workers int) histories[K] {
	hs := make(histories[K], workers)
	for i := range hs {
		hs[i] = &history[K]{maxKeys: max(keyHistoryKeys/workers, minShareKeys)}
	}
	return hs
}

// list returns the latest reconciles of all workers, newest first.
func (hs histories[K]) list() []Reconcile {
	var out []Reconcile
	for _, h := range hs {
		out = append(out, h.list()...)
	}
	if len(hs) > 1 {
		slices.SortStableFunc(out, newestFirst)
	}
	return out[:min(len(out), RecentReconciles)]
}

// byKey returns the latest reconciles of each key kept by any worker,
// newest first, by key as text.
func (hs histories[K]) byKey() map[string][]Reconcile {
	out := hs[0].byKey()
	for _, h := range hs[1:] {
		for key, rs := range h.byKey() {
			merged := append(out[key], rs...)
			slices.SortStableFunc(merged, newestFirst)
			out[key] = merged[:min(len(merged), keyHistoryDepth)]
		}
	}
	return out
}

func newestFirst(a, b Reconcile) int { return b.Time.Compare(a.Time) }
