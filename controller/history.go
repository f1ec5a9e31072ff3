package controller

import (
	"sync"
	"time"
)

// Bounds of the reconciles a controller keeps for Status: the latest
// RecentReconciles of all keys, and the latest keyHistoryDepth of each of
// the keyHistoryKeys keys reconciled most recently.
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

// history keeps the latest reconciles: a ring of all keys', and per key a
// ring of its own, for the most recently reconciled keys (the least
// recent key's is reused for a new key once there are keyHistoryKeys).
// A key's ring holds one record until the key is reconciled again: most
// keys are reconciled once in a while, and a full ring for each of them
// would hold four empty records (some 300 KB a controller).
type history[K comparable] struct {
	mu     sync.Mutex
	recent [RecentReconciles]record[K]
	next   int
	n      int
	keys   map[K]*keyRecords[K]
	// newest and oldest end the list of keys by their latest reconcile.
	newest, oldest *keyRecords[K]
}

type keyRecords[K comparable] struct {
	key K
	// ring holds the key's latest records, at most keyHistoryDepth; next
	// is where the next goes (len(ring) until it is full).
	ring         []record[K]
	next         int
	newer, older *keyRecords[K]
}

// add keeps r. Its causes are no longer changed by anyone, so they are
// kept as they are, shared.
func (h *history[K]) add(r record[K]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent[h.next] = r
	h.next = (h.next + 1) % RecentReconciles
	h.n = min(h.n+1, RecentReconciles)

	k := h.keys[r.key]
	switch {
	case k != nil:
		h.unlink(k)
	case len(h.keys) >= keyHistoryKeys:
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
	switch {
	case len(k.ring) == keyHistoryDepth:
		k.ring[k.next] = r
	case len(k.ring) < cap(k.ring):
		k.ring = append(k.ring, r)
	default:
		// Room for one record, then, for a key reconciled again, for all.
		size := 1
		if len(k.ring) > 0 {
			size = keyHistoryDepth
		}
		ring := make([]record[K], len(k.ring), size)
		copy(ring, k.ring)
		k.ring = append(ring, r)
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
			rs = append(rs, k.ring[(k.next-i+n)%n].reconcile())
		}
		out[keyString(k.key)] = rs
	}
	return out
}
