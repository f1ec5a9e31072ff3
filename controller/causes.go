package controller

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/kloop-dev/kloop/cache"
)

// The Source of the causes the controller gives itself, and of
// Controller.Enqueue.
const (
	causeEnqueue      = "Enqueue"
	causeRetry        = "Retry"
	causeRequeueAfter = "RequeueAfter"
	causeRequeue      = "Requeue"
)

// Cause is one trigger of a reconcile: a change of an object that a source
// mapped to the key, or the controller's own decision to look at the key
// again. The triggers of a key that arrive while it waits (or while it is
// being reconciled) are merged into its next reconcile; CausesFrom returns
// them, and the reconcile's debug log lines carry them as "causes".
type Cause struct {
	// Source is what enqueued the key: "For", "Owns" or "Watches" for an
	// object's change (Kind says which watched kind); "Enqueue" for
	// Controller.Enqueue; "Retry" for the retry of a failed reconcile;
	// "RequeueAfter" for a Result.RequeueAfter; "Requeue" for a
	// Result.Requeue; "Handover" for a key of a
	// shard this replica took over; a custom Source's String(), or
	// "Source", for the keys it adds.
	Source string
	// Kind, Namespace, Name and ResourceVersion name the object whose
	// change this was, at the state it changed to (for a delete, its last
	// known state). They are empty for the controller's own triggers.
	Kind, Namespace, Name, ResourceVersion string
	// Change is what happened to the object: cache.Added, cache.Updated or
	// cache.Deleted; 0 for the controller's own triggers.
	Change cache.ChangeKind
	// Replay marks a change that only re-delivers state (an informer's
	// initial list, an object coming into view through a relist).
	Replay bool
	// Own marks a change that was this program's own write: its
	// resourceVersion is one a write of the App's client returned
	// (Options.OwnWrite), or one a reconcile of the controller wrote. A
	// delete is never marked.
	Own bool

	// merged: the event stood for more than one write (cache.Event.Merged).
	// It lives only until the cause is noted (pendingCauses.add).
	merged bool
}

// String formats c in one line, as the logs show it:
// "Owns Deployment ns/web@1234 Updated (own)", "RequeueAfter".
func (c Cause) String() string {
	var b strings.Builder
	c.format(&b)
	return b.String()
}

func (c Cause) format(b *strings.Builder) {
	b.WriteString(c.Source)
	if c.Kind != "" {
		b.WriteByte(' ')
		b.WriteString(c.Kind)
	}
	if c.Name != "" {
		b.WriteByte(' ')
		if c.Namespace != "" {
			b.WriteString(c.Namespace)
			b.WriteByte('/')
		}
		b.WriteString(c.Name)
	}
	if c.ResourceVersion != "" {
		b.WriteByte('@')
		b.WriteString(c.ResourceVersion)
	}
	if c.Change != 0 {
		b.WriteByte(' ')
		b.WriteString(c.Change.String())
	}
	if c.Replay {
		b.WriteString(" (replay)")
	}
	if c.Own {
		b.WriteString(" (own)")
	}
}

// Bounds of what is kept of the triggers merged into one reconcile: the
// first few of each source and kind, and a count of all of them.
const (
	causesPerSource = 3
	causesKept      = 8
	// unsureKept bounds the triggers left out for the bounds that are
	// kept anyway, unshown, to be matched with the key's own writes when
	// the key is taken (see causeSet.unsure); beyond it, such a trigger
	// makes the reconcile run.
	unsureKept = 256
)

// causeSet is what is kept of the triggers merged into one reconcile. The
// first is kept in place, so that a key with one trigger (the usual case)
// costs no allocation of its own; the others behind a pointer, which keeps
// the set within the 128 bytes a map holds in place (a larger value would
// cost an allocation per key enqueued).
type causeSet struct {
	total int32
	n     int32
	first Cause
	more  *moreCauses
	// held is when Debounce started holding the key (its first trigger
	// from a source), last when a source last triggered it; nanoseconds
	// on the controller's clock, 0 when unknown (no Debounce).
	held, last int64
	// other: a trigger that is not one of the key's own writes was merged
	// in without being kept (or was an event of several writes), so the
	// reconcile is not skipped whatever the kept causes say.
	other bool
}

// moreCauses holds what a causeSet keeps beyond its first cause.
type moreCauses struct {
	// kept are the kept causes after the first.
	kept []Cause
	// unsure are triggers left out for the bounds that may be the key's
	// own writes: the watch event of a write can arrive before the write's
	// response has been recorded, so they are matched when the key is
	// taken, as the kept ones are.
	unsure []Cause
}

func (s *causeSet) extra() *moreCauses {
	if s.more == nil {
		s.more = new(moreCauses)
	}
	return s.more
}

func (s *causeSet) at(i int32) *Cause {
	if i == 0 {
		return &s.first
	}
	return &s.more.kept[i-1]
}

// leftOut notes c, a trigger left out for the bounds: nothing more if own
// says it is already known as the key's own write, else kept unshown to
// be matched later (while there is room), else the set is other.
func (s *causeSet) leftOut(c *Cause, own func(*Cause) bool) {
	if own(c) {
		return
	}
	if c.ResourceVersion == "" || c.Replay || (c.Change != cache.Added && c.Change != cache.Updated) {
		s.other = true
		return
	}
	if s.more != nil && len(s.more.unsure) >= unsureKept {
		s.other = true
		return
	}
	m := s.extra()
	m.unsure = append(m.unsure, *c)
}

// add merges c in: counted always, kept unless the same change is kept
// already or the bounds are reached. It reports whether c was left out for
// the bounds.
func (s *causeSet) add(c Cause) (dropped bool) {
	s.total++
	same := 0
	for i := range s.n {
		k := s.at(i)
		if *k == c {
			return false
		}
		if k.Source == c.Source && k.Kind == c.Kind {
			same++
		}
	}
	if same >= causesPerSource || s.n >= causesKept {
		return true
	}
	if s.n == 0 {
		s.first = c
	} else {
		m := s.extra()
		m.kept = append(m.kept, c)
	}
	s.n++
	return false
}

// list returns the kept causes in a slice of their own.
func (s *causeSet) list() []Cause {
	if s.n == 0 {
		return nil
	}
	out := make([]Cause, 0, s.n)
	out = append(out, s.first)
	if s.more != nil {
		out = append(out, s.more.kept...)
	}
	return out
}

// merge adds every trigger of o, keeping o's count. own tells whether a
// trigger left out for the bounds is one of the key's own writes.
func (s *causeSet) merge(o *causeSet, own func(*Cause) bool) {
	total := s.total + o.total
	for i := range o.n {
		if c := o.at(i); s.add(*c) {
			s.leftOut(c, own)
		}
	}
	if o.more != nil {
		for i := range o.more.unsure {
			s.leftOut(&o.more.unsure[i], own)
		}
	}
	s.other = s.other || o.other
	s.total = total
	if o.held != 0 && (s.held == 0 || o.held < s.held) {
		s.held = o.held
	}
	s.last = max(s.last, o.last)
}

// selfTriggered reports whether every kept trigger is the program's own
// write: a reconcile woken only by what the controller wrote.
func (s *causeSet) selfTriggered() bool {
	if s.n == 0 {
		return false
	}
	for i := range s.n {
		if !s.at(i).Own {
			return false
		}
	}
	return true
}

// String formats the set for logs: the kept causes separated by "; ",
// and how many more were merged.
func (s *causeSet) String() string {
	if s.n == 0 {
		return ""
	}
	var b strings.Builder
	for i := range s.n {
		if i > 0 {
			b.WriteString("; ")
		}
		s.at(i).format(&b)
	}
	if more := s.total - s.n; more > 0 {
		b.WriteString("; and ")
		b.WriteString(strconv.Itoa(int(more)))
		b.WriteString(" more")
	}
	return b.String()
}

// maxLulls is how many times in a row a pending-causes map made for a
// burst may empty before a burst fills a quarter of it again, and still be
// kept: a lull within a burst is not its end.
const maxLulls = 8

// pendingCauses holds the causes of the keys waiting in a controller's
// queue, merged per key, until a worker takes the key.
type pendingCauses[K comparable] struct {
	mu sync.Mutex
	// sets maps a key to its set. A map slot holds a pointer rather than
	// the set: keys come and go all the time, and a Go map emptied by
	// deletes still grows as keys are added (it does not reuse its
	// tombstones), by a quarter the bytes with pointers. The sets come
	// from free, made 32 at a time and refilled as workers take them.
	sets map[K]*causeSet
	free []*causeSet
	peak int
	// hint is the peak of the map last dropped, or half the hint before
	// if that is more: the size the next one is made for, so that a burst
	// like the one before fills it without growing it at every doubling;
	// smaller bursts after it halve it each time. made is the hint the
	// current map was made with. lulls counts the times the map emptied
	// since it was last cleared without a burst filling a quarter of it:
	// the workers catching up within a burst, up to maxLulls times, keep
	// it as it is.
	hint, made, lulls int
	// own, if set, tells whether c is the event of a write of key's own
	// reconciles; asked of a trigger that is left out for the bounds, as
	// it is noted (a kept one is asked when the key is taken).
	own func(key K, c *Cause) bool
}

// ownCause is p.own, or false without it.
func (p *pendingCauses[K]) ownCause(key K, c *Cause) bool {
	return p.own != nil && p.own(key, c)
}

// setFor returns key's set, adding an empty one if it has none. Caller
// holds mu.
func (p *pendingCauses[K]) setFor(key K) *causeSet {
	if p.sets == nil {
		p.sets, p.made = make(map[K]*causeSet, p.hint), p.hint
	}
	s := p.sets[key]
	if s == nil {
		if len(p.free) == 0 {
			// Made 32 at a time: a burst of new keys costs an
			// allocation per 32 of them.
			slab := make([]causeSet, 32)
			for i := range slab {
				p.free = append(p.free, &slab[i])
			}
		}
		s = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		p.sets[key] = s
		p.peak = max(p.peak, len(p.sets))
	}
	return s
}

// add merges c into key's set; now (nanoseconds, 0 without Debounce) is
// when a source triggered it, for Debounce.
func (p *pendingCauses[K]) add(key K, c Cause, now int64) {
	merged := c.merged
	c.merged = false
	p.mu.Lock()
	s := p.setFor(key)
	if s.add(c) {
		// A copy, so that c itself stays on the stack when it is kept.
		left := c
		s.leftOut(&left, func(c *Cause) bool { return p.ownCause(key, c) })
	}
	if merged {
		s.other = true
	}
	if now != 0 {
		if s.held == 0 {
			s.held = now
		}
		s.last = now
	}
	p.mu.Unlock()
}

// take removes and returns key's set. A map that held many keys and is
// empty again is dropped, with the free sets, since a Go map keeps its
// size: a burst of keys (an initial list) leaves no memory behind. It is
// kept when it was made for the burst before and this one filled at least
// a quarter of it: bursts alike keep coming (waves of changes to the same
// objects), and each would otherwise make the map and the sets anew. One
// that empties before a burst filled a quarter of it is kept as it is, up
// to maxLulls times in a row: the workers caught up within a burst.
func (p *pendingCauses[K]) take(key K) causeSet {
	p.mu.Lock()
	var out causeSet
	if s := p.sets[key]; s != nil {
		out = *s
		*s = causeSet{}
		delete(p.sets, key)
		p.free = append(p.free, s)
		if len(p.sets) == 0 && (p.peak > 64 || p.hint > 64) {
			switch {
			case p.made > 64 && 4*p.peak >= p.made:
				// Emptied by deletes, it holds tombstones that would
				// make it grow; clear leaves it empty indeed.
				clear(p.sets)
				p.peak, p.lulls = 0, 0
			case p.made > 64 && p.lulls < maxLulls:
				p.lulls++
			default:
				p.sets, p.free, p.hint, p.peak, p.lulls = nil, nil, max(p.peak, p.hint/2), 0, 0
			}
		}
	}
	p.mu.Unlock()
	return out
}

// putBack merges s, taken by a worker that did not reconcile the key
// (Debounce held it), back into key's set.
func (p *pendingCauses[K]) putBack(key K, s causeSet) {
	p.mu.Lock()
	cur := p.setFor(key)
	s.merge(cur, func(c *Cause) bool { return p.ownCause(key, c) })
	*cur = s
	p.mu.Unlock()
}

// callKey is the context key of a Reconcile call's reconcileCall.
type callKey struct{}

// reconcileCall is what a Reconcile call's context carries for LoggerFrom
// and CausesFrom: its logger and its causes.
type reconcileCall interface {
	callLogger() *slog.Logger
	callCauses() *causeSet
}

// CausesFrom returns the triggers merged into the reconcile whose ctx this
// is: the first few of each source and kind (at most 8 in all), in the
// order they came, and total, how many triggers there were. The slice is
// the caller's. Outside a Reconcile call it returns nil and 0.
//
// A trigger that arrives just as the key is handed to a worker may be
// counted in that reconcile, and the next reconcile it also causes then
// has none: a reconcile with no causes was triggered by a change the
// previous one already saw.
func CausesFrom(ctx context.Context) (causes []Cause, total int) {
	call, ok := ctx.Value(callKey{}).(reconcileCall)
	if !ok {
		return nil, 0
	}
	s := call.callCauses()
	return s.list(), int(s.total)
}
