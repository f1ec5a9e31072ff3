package controller

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// A hot loop is a key reconciled again and again, woken only by the
// program's own writes: a reconcile that writes something which triggers
// the same key again, for ever (a timestamp in the status, an annotation
// that changes on every pass). The controller finds them from the causes
// of its reconciles (Cause.Own), rather than guessing from rates.
const (
	// hotLoopReconciles self-triggered reconciles of one key in a row,
	// within hotLoopWindow, make it a hot loop.
	hotLoopReconciles = 10
	hotLoopWindow     = 30 * time.Second
	// hotLoopWarnEvery is the window of the warning: one per key per
	// window, however long the loop lasts.
	hotLoopWarnEvery = 10 * time.Minute
	// hotLoopsShown bounds Status.HotLoops; hotLoopKeys bounds the keys
	// followed at once.
	hotLoopsShown = 20
	hotLoopKeys   = 1024
)

// HotLoop is a key the controller keeps reconciling only because of its
// own writes (see Status.HotLoops).
type HotLoop struct {
	// Key is the key as text.
	Key string
	// Reconciles counts its self-triggered reconciles in a row, since
	// Since; Last is when the latest of them ran.
	Reconciles  int
	Since, Last time.Time
	// Causes are those of its latest reconcile: what it wrote that woke
	// it.
	Causes []Cause
}

// hotLoops follows the keys whose reconciles were self-triggered.
type hotLoops[K comparable] struct {
	mu   sync.Mutex
	keys map[K]*hotKey
}

type hotKey struct {
	run         int // self-triggered reconciles in a row
	since, last time.Time
	// times of the latest hotLoopReconciles of them, a ring at run's
	// position
	times  [hotLoopReconciles]time.Time
	hot    bool
	warned time.Time
	causes causeSet
}

// observe notes one reconcile of key with causes s at now, and reports
// whether to warn of a hot loop: once per key per hotLoopWarnEvery, when
// the key turns hot.
func (h *hotLoops[K]) observe(key K, s *causeSet, now time.Time) (warn bool, run int, since time.Time) {
	self := s.selfTriggered()
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.keys[key]
	if !self {
		if k != nil && s.n > 0 {
			// A trigger from outside: not a loop of its own making.
			k.run, k.hot = 0, false
		}
		return false, 0, time.Time{}
	}
	if k == nil {
		if h.keys == nil {
			h.keys = make(map[K]*hotKey)
		}
		if len(h.keys) >= hotLoopKeys {
			h.pruneLocked(now)
		}
		k = &hotKey{}
		h.keys[key] = k
	}
	if k.run == 0 || now.Sub(k.last) > hotLoopWindow {
		k.run, k.since, k.hot = 0, now, false
	}
	k.times[k.run%hotLoopReconciles] = now
	k.run++
	k.last = now
	k.causes = *s
	if s.more != nil {
		k.causes.more = &moreCauses{kept: slices.Clone(s.more.kept)}
	}
	// Hot while the latest hotLoopReconciles ran within hotLoopWindow.
	oldest := k.times[k.run%hotLoopReconciles]
	k.hot = k.run >= hotLoopReconciles && now.Sub(oldest) <= hotLoopWindow
	if k.hot && (k.warned.IsZero() || now.Sub(k.warned) >= hotLoopWarnEvery) {
		k.warned = now
		warn = true
	}
	return warn, k.run, k.since
}

// pruneLocked forgets the keys that are not hot and were last
// self-triggered over a warning window ago, or, if that frees nothing,
// all that are not hot.
func (h *hotLoops[K]) pruneLocked(now time.Time) {
	for key, k := range h.keys {
		if !k.hot && now.Sub(k.last) > hotLoopWarnEvery {
			delete(h.keys, key)
		}
	}
	if len(h.keys) < hotLoopKeys {
		return
	}
	for key, k := range h.keys {
		if !k.hot {
			delete(h.keys, key)
		}
	}
}

// list returns the hot keys whose loop ran within the last window, most
// reconciles first.
func (h *hotLoops[K]) list(now time.Time) []HotLoop {
	h.mu.Lock()
	var out []HotLoop
	for key, k := range h.keys {
		if k.hot && now.Sub(k.last) <= hotLoopWindow {
			out = append(out, HotLoop{Key: keyString(key), Reconciles: k.run, Since: k.since, Last: k.last, Causes: k.causes.list()})
		}
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b HotLoop) int {
		return cmp.Or(cmp.Compare(b.Reconciles, a.Reconciles), cmp.Compare(a.Key, b.Key))
	})
	if len(out) > hotLoopsShown {
		out = out[:hotLoopsShown]
	}
	return out
}

// watchLoop counts a self-triggered reconcile and warns of a key that
// turned into a hot loop. log is the reconcile's.
func (c *Controller[K]) watchLoop(key K, log *slog.Logger, s *causeSet, now time.Time) {
	if s.selfTriggered() {
		c.m.selfTriggered.Inc()
	}
	warn, run, since := c.hot.observe(key, s, now)
	if warn {
		log.Warn("Hot loop: the key keeps being reconciled, woken only by the controller's own writes; make the reconcile write only what changed",
			"reconciles", run, "within", now.Sub(since).Round(time.Millisecond), "causes", s.String())
	}
}
