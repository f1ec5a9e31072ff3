package cache

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kloop-dev/kloop/internal/rvorder"
	"github.com/kloop-dev/kloop/watcher"
)

// ErrUnknownIndex is returned by ByIndex for an index the store was not
// configured with.
var ErrUnknownIndex = errors.New("cache: unknown index")

// Options configures a Store. The zero value is a store with only the
// built-in namespace index.
type Options[T watcher.Object] struct {
	// Indexes are the secondary indexes to maintain, by name. The namespace
	// index is built in and must not be listed; LabelIndexFunc and
	// OwnerIndexFunc are ready-made functions (conventionally under
	// IndexLabel and IndexOwner). Each index costs memory per object, so
	// configure only the ones you query.
	Indexes map[string]IndexFunc[T]
	// Encoded keeps every object as its protobuf encoding, without
	// managedFields, and decodes it again on every read, so that an object
	// costs little more than its encoded size (a decoded object takes
	// about twice that). Reads cost a decode each (under a microsecond
	// of CPU for a small ConfigMap) and return a new object every time;
	// writes cost an encode, and an update or delete a decode of the
	// object it replaces. T must be a protobuf type, as the built-in types
	// are (custom resources are not).
	Encoded bool
}

func (o Options[T]) validate() error {
	for name, fn := range o.Indexes {
		switch {
		case name == "":
			return errors.New("cache: an index has an empty name")
		case name == IndexNamespace:
			return fmt.Errorf("cache: index %q is built in and cannot be configured", name)
		case fn == nil:
			return fmt.Errorf("cache: index %q has a nil IndexFunc", name)
		}
	}
	return nil
}

// Lister reads a Store. It is safe for concurrent use.
//
// Every object it returns is shared with the store and with every other
// reader: treat it as read-only. To change an object, Copy it first. In
// tests the mutation detector turns a violation into a failure. Returned
// slices are the caller's own.
//
// A store is a cache: it may lag behind the API server, so an object read
// here can already be stale.
type Lister[T watcher.Object] interface {
	// Get returns the object namespace/name (namespace "" for cluster-scoped
	// objects). The object is read-only.
	Get(namespace, name string) (T, bool)
	// List returns the objects, in all namespaces, whose labels match
	// selector (nil matches everything), in no particular order. The
	// objects are read-only.
	List(selector labels.Selector) []T
	// ListInNamespace is List restricted to one namespace; namespace ""
	// means all namespaces. The objects are read-only.
	ListInNamespace(namespace string, selector labels.Selector) []T
	// ByIndex returns the objects indexed under value in the named index,
	// or ErrUnknownIndex. The objects are read-only.
	ByIndex(index, value string) ([]T, error)
	// Len is the number of objects held.
	Len() int
	// ResourceVersion is the resourceVersion the store has caught up with:
	// that of the last event, bookmark or relist applied to it.
	ResourceVersion() string
	// WaitFor blocks until the store has seen resourceVersion rv for key:
	// either the object stored under key is at rv or later, or the whole
	// store has reached rv (which also covers a delete). Use it after a
	// write, with the resourceVersion the API server returned, to read your
	// own write. It returns an error wrapping context.Cause(ctx) when ctx
	// ends first. Resource versions are compared as the integers the
	// API server issues; an unparsable rv is reached only by equality.
	WaitFor(ctx context.Context, key Key, rv string) error
	// Changed returns a channel that is closed the next time the store
	// applies anything: an event, a bookmark or a relist. To wait for a
	// condition on the store, take the channel first, then check the
	// condition, then wait on the channel: a change that lands between the
	// check and the wait still wakes the waiter. WaitFor is that loop.
	Changed() <-chan struct{}
}

// Store is a thread-safe, indexed map from Key to the latest known state of
// an object. It has exactly one Writer, returned by New, and any number of
// concurrent readers through its Lister methods.
//
// Memory per object is one slot of a per-namespace table keyed by the
// object's name (the namespace index is that grouping; see table), plus
// one set entry per value of each configured index. The store keeps no
// history.
type Store[T watcher.Object] struct {
	mu      sync.RWMutex
	objs    map[string]*table[T]     // namespace → name → object
	enc     map[string]*table[entry] // instead of objs when encoded: namespace → name → entry
	codec   *codec[T]                // nil unless encoded
	count   int
	indexes map[string]*index[T]
	rv      string
	// changed is closed, and set to nil, when the store applies anything.
	// It exists only while someone waits on it (Changed). Its own mutex
	// lets waiters take it without the store's write lock.
	changedMu sync.Mutex
	changed   chan struct{}

	detect *detector[T] // nil unless the mutation detector is on
}

var _ Lister[watcher.Object] = (*Store[watcher.Object])(nil)

// Writer is the single writer of a Store. Its methods must be called from
// one goroutine at a time. It takes ownership of the objects it is given:
// the caller must not modify them afterwards.
type Writer[T watcher.Object] struct {
	s *Store[T]
}

// New returns an empty store and its only writer. It fails only when opts
// is invalid.
func New[T watcher.Object](opts Options[T]) (*Store[T], *Writer[T], error) {
	if err := opts.validate(); err != nil {
		return nil, nil, err
	}
	s := &Store[T]{
		objs:    make(map[string]*table[T]),
		indexes: make(map[string]*index[T], len(opts.Indexes)),
	}
	if opts.Encoded {
		c, err := newCodec[T]()
		if err != nil {
			return nil, nil, err
		}
		// Readers get objects of their own from an encoded store: there is
		// nothing shared for them to mutate, and no detector.
		s.objs, s.enc, s.codec = nil, make(map[string]*table[entry]), c
	} else {
		s.detect = newDetector[T]()
	}
	for name, fn := range opts.Indexes {
		s.indexes[name] = newIndex(fn, 0)
	}
	return s, &Writer[T]{s: s}, nil
}

// Copy returns a deep copy of obj that the caller owns and may modify.
func Copy[T watcher.Object](obj T) T {
	return obj.DeepCopyObject().(T)
}

// Get implements Lister. The objects it returns are shared and read-only;
// Copy one before modifying it.
func (s *Store[T]) Get(namespace, name string) (T, bool) {
	if s.codec != nil {
		return s.getEncoded(namespace, name)
	}
	s.mu.RLock()
	obj, ok := s.objs[namespace].get(name)
	s.mu.RUnlock()
	return obj, ok
}

// List implements Lister. The objects it returns are shared and read-only;
// Copy one before modifying it.
func (s *Store[T]) List(selector labels.Selector) []T {
	return s.ListInNamespace("", selector)
}

// ListInNamespace implements Lister. The objects it returns are shared and read-only;
// Copy one before modifying it.
func (s *Store[T]) ListInNamespace(namespace string, selector labels.Selector) []T {
	if selector != nil && selector.Empty() {
		selector = nil
	}
	if s.codec != nil {
		return s.listEncoded(namespace, selector)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if selector != nil {
		if keys, ok := s.labelCandidates(selector); ok {
			out := make([]T, 0, len(keys))
			for k := range keys {
				if namespace != "" && k.Namespace != namespace {
					continue
				}
				obj, _ := s.objs[k.Namespace].get(k.Name)
				if selector.Matches(labels.Set(obj.GetLabels())) {
					out = append(out, obj)
				}
			}
			return out
		}
	}
	var out []T
	add := func(byName *table[T]) {
		if byName == nil {
			return
		}
		for obj := range byName.all() {
			if selector == nil || selector.Matches(labels.Set(obj.GetLabels())) {
				out = append(out, obj)
			}
		}
	}
	if namespace != "" {
		if selector == nil {
			out = make([]T, 0, s.objs[namespace].len())
		}
		add(s.objs[namespace])
		return out
	}
	if selector == nil {
		out = make([]T, 0, s.count)
	}
	for _, byName := range s.objs {
		add(byName)
	}
	return out
}

// labelCandidates narrows a selector through the label index when one is
// configured and the selector has an equality requirement. Caller holds mu.
func (s *Store[T]) labelCandidates(selector labels.Selector) (map[Key]struct{}, bool) {
	ix := s.indexes[IndexLabel]
	if ix == nil {
		return nil, false
	}
	reqs, selectable := selector.Requirements()
	if !selectable {
		return nil, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
		case selection.In:
			if r.Values().Len() != 1 {
				continue
			}
		default:
			continue
		}
		return ix.values[labelIndexValue(r.Key(), r.Values().UnsortedList()[0])], true
	}
	return nil, false
}

// ByIndex implements Lister. The objects it returns are shared and read-only;
// Copy one before modifying it.
func (s *Store[T]) ByIndex(name, value string) ([]T, error) {
	if name == IndexNamespace {
		if value == "" {
			return nil, nil // cluster-scoped objects are in no namespace
		}
		return s.ListInNamespace(value, nil), nil
	}
	if s.codec != nil {
		return s.byIndexEncoded(name, value)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ix := s.indexes[name]
	if ix == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownIndex, name)
	}
	keys := ix.values[value]
	out := make([]T, 0, len(keys))
	for k := range keys {
		obj, _ := s.objs[k.Namespace].get(k.Name)
		out = append(out, obj)
	}
	return out, nil
}

// Len implements Lister.
func (s *Store[T]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}

// ResourceVersion implements Lister.
func (s *Store[T]) ResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// WaitFor implements Lister.
func (s *Store[T]) WaitFor(ctx context.Context, key Key, rv string) error {
	for {
		changed := s.Changed()
		s.mu.RLock()
		ok, cur := s.reachedLocked(key, rv), s.rv
		s.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("cache: waiting for %s at resourceVersion %s (store is at %q): %w", key, rv, cur, context.Cause(ctx))
		}
	}
}

// Changed implements Lister.
func (s *Store[T]) Changed() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *Store[T]) reachedLocked(key Key, rv string) bool {
	if rvorder.AtOrAfter(s.rv, rv) {
		return true
	}
	if s.codec != nil {
		e, ok := s.enc[key.Namespace].get(key.Name)
		_, erv := meta(e)
		return ok && rvorder.AtOrAfter(erv, rv)
	}
	obj, ok := s.objs[key.Namespace].get(key.Name)
	return ok && rvorder.AtOrAfter(obj.GetResourceVersion(), rv)
}

// moveRVLocked records that the store reached rv. Outside a relist the
// resourceVersion only moves forward, so a late bookmark cannot make it go
// back.
func (s *Store[T]) moveRVLocked(rv string, relist bool) {
	if rv != "" && (relist || !rvorder.AtOrAfter(s.rv, rv)) {
		s.rv = rv
	}
}

// advanceLocked records that the store reached rv (see moveRVLocked) and
// wakes WaitFor callers.
func (s *Store[T]) advanceLocked(rv string, relist bool) {
	s.moveRVLocked(rv, relist)
	s.changedMu.Lock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.changedMu.Unlock()
}

// Apply stores obj under its key and returns what it replaced. The
// store's resourceVersion becomes rv: the point of the stream up to which
// every change has been applied. A writer that applies changes in stream
// order passes obj's own resourceVersion; one that applies a key's
// coalesced changes at that key's first place in line (as an informer's
// delta queue does) passes the stream's position, which may be behind
// obj's. WaitFor relies on it: a store at rv holds every change up to rv.
// Write applies many changes at once.
func (w *Writer[T]) Apply(obj T, rv string) (old T, existed bool) {
	c := [1]Change[T]{{Obj: obj, RV: rv}}
	w.Write(c[:])
	return c[0].Old, c[0].Existed
}

// Change is one change for Writer.Write: Obj's new state, as Apply stores
// it, or with Delete Obj's removal, Obj its last state as Delete takes it.
// The store is at RV once it is applied. Write sets Old and Existed to
// what the store held.
type Change[T watcher.Object] struct {
	Obj     T
	Delete  bool
	RV      string
	Old     T
	Existed bool
}

// Write applies changes in order, as Apply and Delete would one by one,
// under one hold of the store's lock: a writer that applies changes as
// they come in bursts (an informer does) makes its readers wait for the
// lock once per burst rather than once per object. Readers see the store
// before the first change or after the last, never in between. For an
// encoded store each change takes the lock once, after being encoded.
func (w *Writer[T]) Write(changes []Change[T]) {
	s := w.s
	if s.codec != nil {
		for i := range changes {
			c := &changes[i]
			if c.Delete {
				c.Old, c.Existed = w.deleteEncoded(c.Obj, c.RV)
			} else {
				c.Old, c.Existed = w.applyEncoded(c.Obj, c.RV)
			}
		}
		return
	}
	s.mu.Lock()
	for i := range changes {
		c := &changes[i]
		k := KeyOf(c.Obj)
		if c.Delete {
			if c.Old, c.Existed = s.objs[k.Namespace].get(k.Name); c.Existed {
				s.removeLocked(k, c.Old)
			}
		} else {
			s.putLocked(k, c)
		}
		s.moveRVLocked(c.RV, false)
	}
	s.advanceLocked("", false)
	s.mu.Unlock()
	if s.detect == nil {
		return
	}
	for i := range changes {
		c := &changes[i]
		k := KeyOf(c.Obj)
		if c.Existed {
			_ = s.detect.released(k, c.Old)
		}
		if !c.Delete {
			s.detect.stored(k, c.Obj)
		}
	}
}

// putLocked stores c.Obj under k, setting c.Old and c.Existed. Caller
// holds mu.
func (s *Store[T]) putLocked(k Key, c *Change[T]) {
	byName := s.objs[k.Namespace]
	if byName == nil {
		byName = newTable[T](0)
		s.objs[k.Namespace] = byName
	}
	c.Old, c.Existed = byName.put(c.Obj)
	if c.Existed {
		for _, ix := range s.indexes {
			ix.update(k, c.Old, c.Obj)
		}
		return
	}
	s.count++
	for _, ix := range s.indexes {
		ix.add(k, c.Obj)
	}
}

// Delete removes the object with final's key, where final is the object's
// last state (as a watch Deleted event carries it), and returns what the
// store held. The store's resourceVersion becomes rv, as for Apply.
func (w *Writer[T]) Delete(final T, rv string) (old T, existed bool) {
	c := [1]Change[T]{{Obj: final, Delete: true, RV: rv}}
	w.Write(c[:])
	return c[0].Old, c[0].Existed
}

// removeLocked drops k from the maps and indexes. Caller holds mu.
func (s *Store[T]) removeLocked(k Key, old T) {
	byName := s.objs[k.Namespace]
	byName.remove(k.Name)
	if byName.len() == 0 {
		delete(s.objs, k.Namespace)
	}
	s.count--
	for _, ix := range s.indexes {
		ix.remove(k, old)
	}
}

// AddIndex adds an index and fills it from the current contents. It
// fails if the name is taken or invalid.
func (w *Writer[T]) AddIndex(name string, fn IndexFunc[T]) error {
	if err := (Options[T]{Indexes: map[string]IndexFunc[T]{name: fn}}).validate(); err != nil {
		return err
	}
	s := w.s
	if _, taken := s.indexes[name]; taken {
		return fmt.Errorf("cache: index %q already exists", name)
	}
	ix := newIndex(fn, 0)
	for ns, byName := range s.objs { // only the writer modifies s.objs
		for obj := range byName.all() {
			ix.add(Key{Namespace: ns, Name: obj.GetName()}, obj)
		}
	}
	for ns, byName := range s.enc { // nor s.enc
		for e := range byName.all() {
			ix.add(Key{Namespace: ns, Name: e.GetName()}, s.codec.decode(ns, e))
		}
	}
	indexes := make(map[string]*index[T], len(s.indexes)+1)
	for n, x := range s.indexes {
		indexes[n] = x
	}
	indexes[name] = ix
	s.mu.Lock()
	s.indexes = indexes
	s.mu.Unlock()
	return nil
}

// Bookmark records that the store has caught up with rv without any
// object changing.
func (w *Writer[T]) Bookmark(rv string) {
	s := w.s
	s.mu.Lock()
	s.advanceLocked(rv, false)
	s.mu.Unlock()
}

// Replace makes the store hold exactly objs, a consistent snapshot at rv,
// and returns the difference from what it held before: Added for new keys,
// Updated for objects whose resourceVersion changed, Deleted for keys the
// snapshot lacks (with FinalStateUnknown: the snapshot only shows that they
// are gone). An object whose key now holds a different UID was deleted and
// re-created: that is a Deleted followed by an Added. All Deleted events
// come first. Readers see either the old or the new contents,
// never a mixture.
//
// An object whose resourceVersion did not change keeps its stored pointer,
// so readers that hold it see no churn and the snapshot's duplicate is
// released. When objs has two objects with one key, the later one wins.
func (w *Writer[T]) Replace(objs []T, rv string) []Event[T] {
	// Counting first sizes each map exactly instead of leaving growth slack.
	sizes := make(map[string]int, len(w.s.objs)+1)
	for _, obj := range objs {
		sizes[obj.GetNamespace()]++
	}
	snap := &Snapshot[T]{objs: make(map[string]*table[T], len(sizes)), codec: w.s.codec}
	for ns, n := range sizes {
		snap.objs[ns] = newTable[T](capFor(n))
	}
	for _, obj := range objs {
		snap.Add(obj)
	}
	return w.replaceWith(snap, rv)
}

// Snapshot collects a full listing for Writer.ReplaceLazily, grouped the way
// a store holds its objects, so that swapping it in copies nothing: its
// maps become the store's. Fill it while the listing arrives, and the work
// of building the store's maps is done by the time the last object is in.
//
// The zero value is an empty snapshot; Writer.NewSnapshot returns one that
// also encodes its objects as they are added, for an encoded store. A
// Snapshot is filled from one goroutine at a time. ReplaceLazily takes it
// over, together with the objects in it.
type Snapshot[T watcher.Object] struct {
	objs  map[string]*table[T] // namespace → name → object
	count int
	codec *codec[T]                // set: also encode into enc
	enc   map[string]*table[entry] // namespace → name → entry
}

// NewSnapshot returns an empty snapshot for ReplaceLazily. For an encoded
// store it encodes each object as it is added, so that ReplaceLazily need
// not; a zero Snapshot works too.
func (w *Writer[T]) NewSnapshot() *Snapshot[T] {
	return &Snapshot[T]{codec: w.s.codec}
}

// Add puts obj in the snapshot. An object with the key of one added before
// replaces it.
//
// A snapshot for an encoded store keeps only the encoding: the decoded
// object is the caller's to drop, so that a snapshot of any size never
// holds the decoded form of all its objects.
func (s *Snapshot[T]) Add(obj T) {
	ns := obj.GetNamespace()
	if s.codec != nil {
		if s.enc == nil {
			s.enc = make(map[string]*table[entry])
		}
		encByName := s.enc[ns]
		if encByName == nil {
			encByName = newTable[entry](0)
			s.enc[ns] = encByName
		}
		if _, replaced := encByName.put(s.codec.encode(obj)); !replaced {
			s.count++
		}
		return
	}
	if s.objs == nil {
		s.objs = make(map[string]*table[T])
	}
	byName := s.objs[ns]
	if byName == nil {
		byName = newTable[T](0)
		s.objs[ns] = byName
	}
	if _, replaced := byName.put(obj); !replaced {
		s.count++
	}
}

// Retain drops the objects for which keep returns false.
func (s *Snapshot[T]) Retain(keep func(T) bool) {
	var drop []string
	if s.codec != nil {
		for ns, byName := range s.enc {
			drop = drop[:0]
			for e := range byName.all() {
				if !keep(s.codec.decode(ns, e)) {
					drop = append(drop, e.GetName())
				}
			}
			for _, name := range drop {
				byName.remove(name)
				s.count--
			}
			if byName.len() == 0 {
				delete(s.enc, ns)
			}
		}
		return
	}
	for ns, byName := range s.objs {
		drop = drop[:0]
		for obj := range byName.all() {
			if !keep(obj) {
				drop = append(drop, obj.GetName())
			}
		}
		for _, name := range drop { // not while iterating: removing moves entries
			byName.remove(name)
			s.count--
		}
		if byName.len() == 0 {
			delete(s.objs, ns)
		}
	}
}

// Len is the number of distinct keys in the snapshot.
func (s *Snapshot[T]) Len() int { return s.count }

// All yields the snapshot's objects, in no particular order.
// Those of a snapshot for an encoded store are decoded one at a time.
func (s *Snapshot[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		if s.codec != nil {
			for ns, byName := range s.enc {
				for e := range byName.all() {
					if !yield(s.codec.decode(ns, e)) {
						return
					}
				}
			}
			return
		}
		for _, byName := range s.objs {
			for obj := range byName.all() {
				if !yield(obj) {
					return
				}
			}
		}
	}
}

// replaceWith makes the store hold exactly the objects of snap, a
// consistent snapshot at rv, as Replace does, and takes snap over: the
// caller must not use it afterwards.
func (w *Writer[T]) replaceWith(snap *Snapshot[T], rv string) []Event[T] {
	s := w.s
	if s.codec != nil {
		return w.replaceEncoded(snap, rv)
	}
	// Only this writer modifies s.objs, so it reads it here without the
	// lock; the new maps are built aside and swapped in under the lock.
	newObjs, count := snap.objs, snap.count
	snap.objs, snap.count = nil, 0
	if newObjs == nil {
		newObjs = make(map[string]*table[T])
	}
	for _, byName := range newObjs {
		byName.fit()
	}

	var deletes []Event[T]
	for ns, byName := range s.objs {
		for old := range byName.all() {
			obj, ok := newObjs[ns].get(old.GetName())
			switch {
			case !ok, old.GetUID() != obj.GetUID():
				deletes = append(deletes, Event[T]{Kind: Deleted, Old: old, FinalStateUnknown: true})
			case old.GetResourceVersion() == obj.GetResourceVersion():
				newObjs[ns].put(old) // unchanged: keep the pointer readers may hold
			}
		}
	}
	changes := make([]Event[T], 0, len(deletes)+count)
	changes = append(changes, deletes...)
	for ns, byName := range newObjs {
		for obj := range byName.all() {
			old, had := s.objs[ns].get(obj.GetName())
			switch {
			case !had, old.GetUID() != obj.GetUID():
				changes = append(changes, Event[T]{Kind: Added, New: obj, Merged: true})
			case old.GetResourceVersion() != obj.GetResourceVersion():
				changes = append(changes, Event[T]{Kind: Updated, Old: old, New: obj, Merged: true})
			}
		}
	}
	newIndexes := make(map[string]*index[T], len(s.indexes))
	for name, ix := range s.indexes {
		nix := newIndex(ix.fn, len(ix.values))
		for ns, byName := range newObjs {
			for obj := range byName.all() {
				nix.add(Key{Namespace: ns, Name: obj.GetName()}, obj)
			}
		}
		newIndexes[name] = nix
	}

	s.mu.Lock()
	s.objs, s.count, s.indexes = newObjs, count, newIndexes
	s.advanceLocked(rv, true)
	s.mu.Unlock()

	if s.detect != nil {
		for _, c := range changes {
			switch c.Kind {
			case Deleted:
				_ = s.detect.released(KeyOf(c.Old), c.Old)
			case Updated:
				_ = s.detect.released(KeyOf(c.Old), c.Old)
				s.detect.stored(KeyOf(c.New), c.New)
			case Added:
				s.detect.stored(KeyOf(c.New), c.New)
			}
		}
	}
	return changes
}

// CheckMutations compares every stored object with the copy the mutation
// detector took when it was stored and reports each difference; it returns
// them joined. It does nothing when the detector is off.
func (w *Writer[T]) CheckMutations() error {
	s := w.s
	if s.detect == nil { // off, or an encoded store
		return nil
	}
	var errs []error
	s.mu.RLock()
	defer s.mu.RUnlock()
	for ns, byName := range s.objs {
		for obj := range byName.all() {
			k := Key{Namespace: ns, Name: obj.GetName()}
			if orig, ok := s.detect.copies[k]; ok {
				if err := s.detect.compare(k, orig, obj); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}
