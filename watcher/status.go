package watcher

import (
	"fmt"
	"time"

	"github.com/kloop-dev/kloop/internal/kmetrics"
)

// Phase says what a reflector is doing.
type Phase uint8

const (
	// PhaseStopped: Run is not running.
	PhaseStopped Phase = iota
	// PhaseListing: fetching a snapshot (a paginated LIST or a streaming
	// list).
	PhaseListing
	// PhaseConnecting: opening a watch after a snapshot.
	PhaseConnecting
	// PhaseWatching: a watch is open and events flow.
	PhaseWatching
	// PhaseWaiting: backing off after an error (see Status.LastError)
	// before the next attempt.
	PhaseWaiting
)

var phaseNames = [...]string{"stopped", "listing", "connecting", "watching", "waiting"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// Status is what a reflector knows about itself at one moment.
type Status struct {
	Phase Phase
	// LastError is LastError().
	LastError error
	// ResourceVersion is that of the newest event delivered to emit (a
	// RelistDone, a Bookmark or an object event), or "" before the first
	// snapshot completed.
	ResourceVersion string
	// LastEvent is when the newest event (object, bookmark or snapshot)
	// arrived from the server; zero before any.
	LastEvent time.Time
	// Since NewReflector: LIST calls (one per page), WATCH calls (streaming
	// lists included), errors (see Options.OnError) and completed snapshots.
	// They are the counters behind the kloop_reflector_* metrics.
	Lists, Watches, Errors, Snapshots uint64
}

// phaseOf is the phase of the action m is about to perform.
func phaseOf[T Object](m *machine[T]) Phase {
	switch m.act.kind {
	case actWait:
		return PhaseWaiting
	case actList:
		return PhaseListing
	case actWatch, actReceive:
		if m.phase == phaseStream {
			return PhaseListing
		}
		if m.act.kind == actWatch {
			return PhaseConnecting
		}
		return PhaseWatching
	}
	return PhaseStopped
}

// Status reports the reflector's phase, last error and counters. It may be
// called from any goroutine; it reads what Run keeps anyway.
func (r *Reflector[T]) Status() Status {
	r.mu.Lock()
	s := Status{Phase: r.phase, LastError: r.lastErr, ResourceVersion: r.lastRV, LastEvent: r.lastEvent}
	r.mu.Unlock()
	s.Lists = kmetrics.Count(r.metrics.lists)
	s.Watches = kmetrics.Count(r.metrics.watches)
	s.Errors = kmetrics.Count(r.metrics.errors)
	s.Snapshots = kmetrics.Count(r.metrics.events[RelistDone])
	return s
}
