package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kloop-dev/kloop/watcher"
)

// splitNamespaces reads Scope.Namespace: "" (all), one namespace, or
// several separated by commas. It returns them sorted and without
// duplicates, so that "b,a" and "a,b" name the same informer.
func splitNamespaces(s string) ([]string, error) {
	if !strings.Contains(s, ",") {
		return []string{s}, nil
	}
	var out []string
	for ns := range strings.SplitSeq(s, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("scope namespace %q: %q is not a namespace name: %s", s, ns, strings.Join(errs, "; "))
		}
		out = append(out, ns)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// namespacesSource is the Source of an informer whose Scope names several
// namespaces: one Source (a reflector) per namespace, merged into the one
// stream an informer takes, so that one cache holds the objects of every
// namespace of the set, keyed by namespace and name as always.
//
//   - It begins with one snapshot of every namespace: each namespace's
//     first snapshot is collected and passed on once it is complete, and
//     the merged snapshot ends once every namespace has either completed
//     one or failed (its Source reports an error), and at least one has
//     completed. A namespace that fails, such as one the program may not
//     list (403) or that does not exist, is left out and named in
//     LastError, and the others are served; its objects come in as adds
//     once it can be listed.
//   - Later, a namespace whose Source takes a new snapshot (its watch
//     expired) cannot be swapped in alone, since the informer swaps whole
//     snapshots: every namespace is listed again, as after a Relist.
//   - The resourceVersion passed on with each event is the lowest each
//     namespace has reached, not the event's own: watches of different
//     namespaces move independently, and the cache must not claim a
//     write in a namespace whose watch lags (read-your-writes rests on it).
type namespacesSource[T watcher.Object] struct {
	namespaces []string
	srcs       []Source[T]
	logger     *slog.Logger
	name       string

	mu         sync.Mutex
	errChanged chan struct{}
}

func newNamespacesSource[T watcher.Object](name string, namespaces []string, srcs []Source[T], logger *slog.Logger) *namespacesSource[T] {
	return &namespacesSource[T]{name: name, namespaces: namespaces, srcs: srcs, logger: logger}
}

// LastError joins the errors of the namespaces that fail, each prefixed
// with its namespace. While some namespace is served, the joined error
// hides what it wraps (apierrors.IsForbidden is false on it): the informer
// is not refused as a whole, and WaitForSync waits for the others.
func (s *namespacesSource[T]) LastError() error {
	var errs []error
	for i, src := range s.srcs {
		if err := src.LastError(); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", s.namespaces[i], err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	err := errors.Join(errs...)
	if len(errs) == len(s.srcs) {
		return err
	}
	return partialError{err}
}

// partialError is the error of some namespaces of several: its message,
// without what it wraps.
type partialError struct{ err error }

func (e partialError) Error() string { return e.err.Error() }

// ErrorChanged implements errorNotifier: the channel is closed the next
// time any namespace's error may have changed.
func (s *namespacesSource[T]) ErrorChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errChanged == nil {
		s.errChanged = make(chan struct{})
	}
	return s.errChanged
}

func (s *namespacesSource[T]) notifyErrorChanged() {
	s.mu.Lock()
	if s.errChanged != nil {
		close(s.errChanged)
		s.errChanged = nil
	}
	s.mu.Unlock()
}

// ListMeta is the latest LIST metadata of the first namespace that has
// one (see Informer.listMeta).
func (s *namespacesSource[T]) ListMeta() metav1.ListMeta {
	for _, src := range s.srcs {
		if l, ok := src.(interface{ ListMeta() metav1.ListMeta }); ok {
			if m := l.ListMeta(); m.ResourceVersion != "" {
				return m
			}
		}
	}
	return metav1.ListMeta{}
}

// Status reports the first failing namespace's Source, else the first
// one's, with LastError for all of them.
func (s *namespacesSource[T]) Status() watcher.Status {
	var out watcher.Status
	for i, src := range s.srcs {
		ss, ok := src.(statusSource)
		if !ok {
			continue
		}
		st := ss.Status()
		if i == 0 || (st.LastError != nil && out.LastError == nil) {
			out.Phase, out.ResourceVersion, out.LastEvent = st.Phase, st.ResourceVersion, st.LastEvent
			out.LastError = st.LastError
		}
		out.Lists += st.Lists
		out.Watches += st.Watches
		out.Errors += st.Errors
		out.Snapshots += st.Snapshots
	}
	out.LastError = s.LastError()
	return out
}

// nsEvent is one event of namespace i's Source, or (failed) a change of
// its error.
type nsEvent[T watcher.Object] struct {
	i      int
	ev     watcher.Event[T]
	failed bool
}

// errRestart ends one round of Run to list every namespace again.
var errRestart = errors.New("informer: relist every namespace")

// Run implements Source.
func (s *namespacesSource[T]) Run(ctx context.Context, emit func(watcher.Event[T])) error {
	for {
		err := s.round(ctx, emit)
		if !errors.Is(err, errRestart) {
			return err
		}
		s.logger.Info("informer: a namespace was listed again; listing every namespace again", "informer", s.name)
	}
}

// round runs every namespace's Source until ctx is done, or until one
// namespace that is in the cache takes a new snapshot (errRestart).
func (s *namespacesSource[T]) round(parent context.Context, emit func(watcher.Event[T])) error {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	ch := make(chan nsEvent[T])
	send := func(e nsEvent[T]) {
		select {
		case ch <- e:
		case <-ctx.Done():
		}
	}
	runErrs := make(chan error, len(s.srcs))
	for i, src := range s.srcs {
		wg.Go(func() {
			if err := src.Run(ctx, func(ev watcher.Event[T]) { send(nsEvent[T]{i: i, ev: ev}) }); err != nil {
				runErrs <- fmt.Errorf("namespace %s: %w", s.namespaces[i], err)
				cancel()
			}
		})
		if n, ok := src.(errorNotifier); ok {
			wg.Go(func() {
				for {
					changed := n.ErrorChanged()
					if src.LastError() != nil {
						send(nsEvent[T]{i: i, failed: true})
					}
					s.notifyErrorChanged()
					select {
					case <-changed:
					case <-ctx.Done():
						return
					}
				}
			})
		}
	}

	m := newNSMerge[T](len(s.srcs))
	emit(watcher.Event[T]{Type: watcher.RelistStart})
	for {
		select {
		case <-ctx.Done():
			select {
			case err := <-runErrs:
				return err
			default:
				return nil
			}
		case e := <-ch:
			was := m.state[e.i]
			out, restart := m.step(e)
			for _, ev := range out {
				emit(ev)
			}
			if was == nsListing && m.state[e.i] == nsFailed {
				s.logger.Warn("informer: namespace left out until it can be listed; the others are served",
					"informer", s.name, "namespace", s.namespaces[e.i], "err", s.srcs[e.i].LastError())
			}
			if restart {
				return errRestart
			}
		}
	}
}

// nsState is where one namespace stands in a merge.
type nsState uint8

const (
	nsListing nsState = iota // its first snapshot of the round is coming
	nsFailed                 // its Source failed before completing one
	nsServed                 // its snapshot is in the merged stream
)

// nsMerge is the pure core of namespacesSource.Run: it turns the events of
// several namespaces' streams into one informer stream.
type nsMerge[T watcher.Object] struct {
	state   []nsState
	served  []bool
	items   [][]T    // the snapshot being received, per namespace
	relist  []bool   // receiving a snapshot (items is valid)
	rv      []string // per namespace: the newest resourceVersion passed on
	held    [][]watcher.Event[T]
	started bool // the merged first snapshot is done
}

func newNSMerge[T watcher.Object](n int) *nsMerge[T] {
	return &nsMerge[T]{
		state:  make([]nsState, n),
		served: make([]bool, n),
		items:  make([][]T, n),
		relist: make([]bool, n),
		rv:     make([]string, n),
		held:   make([][]watcher.Event[T], n),
	}
}

// step takes one event of namespace e.i and returns what to pass on, and
// whether every namespace must be listed again.
func (m *nsMerge[T]) step(e nsEvent[T]) (out []watcher.Event[T], restart bool) {
	i, ev := e.i, e.ev
	if e.failed {
		if m.state[i] == nsListing {
			m.state[i] = nsFailed
		}
		return m.finishFirst(), false
	}
	switch ev.Type {
	case watcher.RelistStart:
		if m.started && m.served[i] {
			// Its objects are in the cache with those of the others: only
			// a snapshot of all of them can say which are gone.
			return nil, true
		}
		m.relist[i], m.items[i] = true, m.items[i][:0]
		return nil, false
	case watcher.RelistItem:
		if m.relist[i] {
			m.items[i] = append(m.items[i], ev.Object)
		}
		return nil, false
	case watcher.RelistDone:
		if !m.relist[i] {
			return nil, false
		}
		items := m.items[i]
		m.relist[i], m.items[i] = false, nil
		switch {
		case !m.started:
			// Part of the merged first snapshot.
			for _, obj := range items {
				out = append(out, watcher.Event[T]{Type: watcher.RelistItem, Object: obj, ResourceVersion: obj.GetResourceVersion()})
			}
			m.state[i], m.served[i], m.rv[i] = nsServed, true, ev.ResourceVersion
			return append(out, m.finishFirst()...), false
		default:
			// A namespace that failed at first: nothing of it is cached,
			// so its snapshot is only adds.
			m.state[i], m.served[i], m.rv[i] = nsServed, true, ev.ResourceVersion
			low := m.lowest()
			for _, obj := range items {
				out = append(out, watcher.Event[T]{Type: watcher.Added, Object: obj, ResourceVersion: low})
			}
			return out, false
		}
	}
	// An object event or a bookmark.
	if m.relist[i] {
		m.relist[i], m.items[i] = false, nil // out of protocol: the snapshot is cut short
	}
	if !m.served[i] {
		return nil, false // not in the cache: its snapshot will bring it
	}
	if !m.started {
		m.held[i] = append(m.held[i], ev)
		return nil, false
	}
	return []watcher.Event[T]{m.pass(i, ev)}, false
}

// pass returns ev of namespace i as the merged stream carries it.
func (m *nsMerge[T]) pass(i int, ev watcher.Event[T]) watcher.Event[T] {
	if ev.ResourceVersion != "" {
		m.rv[i] = ev.ResourceVersion
	}
	ev.ResourceVersion = m.lowest()
	return ev
}

// finishFirst ends the merged first snapshot once no namespace is still
// listing and one is served, and passes on what was held meanwhile.
func (m *nsMerge[T]) finishFirst() []watcher.Event[T] {
	if m.started || slices.Contains(m.state, nsListing) || !slices.Contains(m.served, true) {
		return nil
	}
	m.started = true
	out := []watcher.Event[T]{{Type: watcher.RelistDone, ResourceVersion: m.lowest()}}
	for i, held := range m.held {
		for _, ev := range held {
			out = append(out, m.pass(i, ev))
		}
		m.held[i] = nil
	}
	return out
}

// lowest is the lowest resourceVersion the served namespaces have reached:
// what the merged stream has surely reached everywhere. "" when the
// resource versions cannot be compared.
func (m *nsMerge[T]) lowest() string {
	low := ""
	for i, rv := range m.rv {
		if !m.served[i] || rv == "" {
			continue
		}
		if low == "" {
			low = rv
			continue
		}
		c, err := resourceversion.CompareResourceVersion(rv, low)
		if err != nil {
			return ""
		}
		if c < 0 {
			low = rv
		}
	}
	return low
}
