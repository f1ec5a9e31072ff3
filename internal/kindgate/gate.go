// Package kindgate holds an informer while its kind is not served: the
// kind's CustomResourceDefinition is not installed yet, or was deleted. It
// backs kloop's Options.WaitForKinds.
//
// A Gate is open while the API server serves the kind and shut while it
// does not. Three parts act on it:
//
//   - Guard wraps the informer's ListerWatcher: a 404 from a list or a
//     watch shuts the gate, and the call then waits for its context to
//     end, so that the reflector neither logs the 404 nor retries it.
//   - Gated wraps the informer's Source: while the gate is shut it emits
//     one empty snapshot (the kind has no objects: the cache is emptied
//     and the informer counts as synced) and runs nothing; when the gate
//     opens it runs the reflector, which lists at once; when the gate
//     shuts it stops the reflector and empties the cache again.
//   - Run polls the kind's group and version through discovery (which
//     every authenticated user may read) while the gate is shut, and opens
//     it when the kind is listed under the resource the informer watches.
//
// Nothing here logs an error for a kind that is not served: waiting is the
// gate's normal state, reported by Err, not a failure.
package kindgate

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Timing of Run's polling.
const (
	// Interval is how often a shut gate asks discovery.
	Interval = 2 * time.Second
	// MaxInterval bounds the back-off of a gate whose probe fails or that
	// shuts again soon after opening.
	MaxInterval = 32 * time.Second
	// flapWindow: a gate that shuts within this time of opening (the
	// server's discovery lagging behind the resource, say) doubles its
	// interval.
	flapWindow = 5 * Interval
)

// Probe asks the API server whether the kind is served. served with a nil
// error opens the gate; otherwise why (or err) says what is missing.
type Probe func(ctx context.Context) (served bool, why string, err error)

// Gate is the served state of one kind. Its methods may be called from any
// goroutine.
type Gate struct {
	kind  string // "Foo samplecontroller.k8s.io/v1alpha1"
	probe Probe

	open    atomic.Bool
	mu      sync.Mutex
	reason  string        // why shut
	changed chan struct{} // closed at each change, then replaced
}

// New returns a gate for kind (as "Kind group/version"), open or shut for
// reason, polled with probe by Run.
func New(kind string, open bool, reason string, probe Probe) *Gate {
	g := &Gate{kind: kind, probe: probe, reason: reason, changed: make(chan struct{})}
	g.open.Store(open)
	return g
}

// Kind is the gate's kind, as "Kind group/version".
func (g *Gate) Kind() string { return g.kind }

// Open reports whether the kind is served.
func (g *Gate) Open() bool { return g.open.Load() }

// State returns whether the gate is open and a channel that is closed at
// its next change.
func (g *Gate) State() (open bool, changed <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open.Load(), g.changed
}

// Err is nil while the gate is open; while it is shut, a *WaitingError
// that names the kind and why it waits.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open.Load() {
		return nil
	}
	return &WaitingError{Kind: g.kind, Reason: g.reason}
}

// WaitingError says that an informer waits for its kind to be served.
type WaitingError struct {
	Kind   string
	Reason string
}

func (e *WaitingError) Error() string { return "waiting for kind " + e.Kind + ": " + e.Reason }

// set changes the gate's state and reports whether it changed.
func (g *Gate) set(open bool, reason string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open {
		reason = ""
	}
	if g.open.Load() == open && g.reason == reason {
		return false
	}
	g.open.Store(open)
	g.reason = reason
	close(g.changed)
	g.changed = make(chan struct{})
	return true
}

// Shut marks the kind not served, for reason.
func (g *Gate) Shut(reason string) bool { return g.set(false, reason) }

// Reopen marks the kind served.
func (g *Gate) Reopen() bool { return g.set(true, "") }

// Run polls the probe while the gate is shut, every Interval, and opens
// the gate once the kind is served, until ctx is done. A probe that fails,
// and a gate that shuts again soon after it opened, double the interval
// (up to MaxInterval) until a probe succeeds, or the gate stays open. It
// logs each change of the gate, and each new reason to wait, once.
func (g *Gate) Run(ctx context.Context, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("kind", g.kind)
	base := Interval // doubled by flapping
	interval := base // doubled again by failed probes
	var openedAt time.Time
	lastWhy := ""
	probes := 0
	for ctx.Err() == nil {
		open, changed := g.State()
		if open {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			if err, ok := g.Err().(*WaitingError); ok {
				log.Info("Kind not served: its informers are emptied and its controllers hold until it is served", "reason", err.Reason)
				if !openedAt.IsZero() && time.Since(openedAt) < flapWindow {
					base = min(2*base, MaxInterval)
				} else {
					base = Interval
				}
				interval = base
				lastWhy = ""
			}
			continue
		}
		served, why, err := g.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		probes++
		log.Debug("Asked discovery for kind", "served", served && err == nil, "probes", probes)
		switch {
		case err != nil:
			why = "discovery failed: " + err.Error()
			interval = min(2*interval, MaxInterval)
		case served:
			if g.Reopen() {
				log.Info("Kind served: starting its informers and controllers")
			}
			openedAt = time.Now()
			continue
		default:
			interval = base
		}
		if why != lastWhy {
			level := slog.LevelInfo
			if err != nil {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "Waiting for kind", "reason", why, "retry", interval)
			lastWhy = why
		}
		g.Shut(why)
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// String describes the gate, for logs.
func (g *Gate) String() string {
	if err := g.Err(); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("kind %s: served", g.kind)
}

// ResourceName is how kloop names the resource gvr: in informer names, in
// the keys of a factory's WaitFor and Restrict, and on the debug page (the
// metadata and unstructured informers add " (metadata)" and
// " (unstructured)"). For example "deployments.v1.apps".
func ResourceName(gvr schema.GroupVersionResource) string {
	s := gvr.Resource + "." + gvr.Version
	if gvr.Group != "" {
		s += "." + gvr.Group
	}
	return s
}
