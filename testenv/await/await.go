package await

import (
	"context"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/internal/ctxwait"
)

// TB is the part of testing.TB the waits use; *testing.T and *testing.B
// satisfy it. It is declared here so that code built on the waits (kloop's
// internal test helpers) does not link package testing into programs.
type TB interface {
	Helper()
	Context() context.Context
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Timeout bounds every wait of this package. It is long because the
// machines tests run on may be slow and loaded; a wait that needs it all
// has failed anyway.
const Timeout = 60 * time.Second

// Signal tells waiters that something changed. Notify wakes every waiter;
// it never blocks. The zero value is ready to use. A Signal carries no
// value: waiters look at the state they care about themselves.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Notify wakes everyone waiting on a channel from Changed.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Changed returns a channel that the next Notify closes. Take it before
// looking at the state, so that a change in between is not missed.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Until waits until cond holds. cond is checked at once and again after
// each change changed reports: changed is called before each check and
// returns a channel that is closed (or receives) at the next change, such
// as Signal.Changed. Until fails t, naming what, if cond does not hold
// within Timeout or before t's context ends.
func Until(t TB, what string, changed func() <-chan struct{}, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	if err := ctxwait.Until(ctx, changed, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
