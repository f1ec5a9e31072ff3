package cache

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"sync/atomic"

	"github.com/kloop-dev/kloop/watcher"
)

// MutationDetectorEnv names the environment variable that switches the
// mutation detector on ("1", "true") or off ("0", "false") for the stores
// created from then on, unless this package's tests say otherwise
// (setMutationHandler). testenv.DetectMutations sets it for the test binary
// and the processes its tests start.
const MutationDetectorEnv = "KLOOP_CACHE_MUTATION_DETECTOR"

// mutationError reports that a cached object was modified in place by
// someone who got it from a store. Cached objects are shared by every reader
// and must be treated as read-only; write to a Copy instead.
type mutationError struct {
	Key  Key
	Type string
	// Before and After are the JSON forms of the object as it was stored
	// and as it was found.
	Before, After string
}

func (e *mutationError) Error() string {
	return fmt.Sprintf("cache: cached %s %s was modified in place; objects from a store are read-only, use cache.Copy before writing\nstored: %s\nfound:  %s",
		e.Type, e.Key, e.Before, e.After)
}

// mutationHandler is non-nil when the detector is on. A store reads it once,
// when it is created. mutationSet says the program has set it (which
// overrides MutationDetectorEnv).
var (
	mutationHandler atomic.Pointer[func(error)]
	mutationSet     atomic.Bool
)

// handler returns the detector's report function for a store created now;
// nil: the detector is off. MutationDetectorEnv is read here, not once at
// start, so that a test main can set it for its own process too.
func handler() *func(error) {
	if mutationSet.Load() {
		return mutationHandler.Load()
	}
	if v, ok := os.LookupEnv(MutationDetectorEnv); ok {
		if on, err := strconv.ParseBool(v); err == nil && on {
			h := panicOnMutation
			return &h
		}
	}
	return nil
}

func panicOnMutation(err error) { panic(err) }

// The detector keeps a deep copy of every stored object and compares the
// two whenever the store replaces or drops the object, and when
// Writer.CheckMutations is called (informers call it when they stop). It
// doubles the memory and CPU of the cache, so it is off unless switched
// on: by KLOOP_CACHE_MUTATION_DETECTOR=1, which test mains set through
// testenv.DetectMutations (testenv's Shared.Main calls it), or by
// setMutationHandler in this package's tests. A mutation found panics
// with a *mutationError.

// setMutationHandler switches the mutation detector on for stores created
// from now on, with report called (from the writer's goroutine) for each
// mutation found; report == nil switches it off. It returns a function that
// restores the previous setting.
func setMutationHandler(report func(error)) (restore func()) {
	var prev *func(error)
	wasSet := mutationSet.Swap(true)
	if report == nil {
		prev = mutationHandler.Swap(nil)
	} else {
		prev = mutationHandler.Swap(&report)
	}
	return func() {
		mutationHandler.Store(prev)
		mutationSet.Store(wasSet)
	}
}

// detector holds the pristine copies of a store's objects.
type detector[T watcher.Object] struct {
	report func(error)
	copies map[Key]T
}

func newDetector[T watcher.Object]() *detector[T] {
	h := handler()
	if h == nil {
		return nil
	}
	return &detector[T]{report: *h, copies: make(map[Key]T)}
}

// stored records obj as the pristine state of k.
func (d *detector[T]) stored(k Key, obj T) {
	if d == nil {
		return
	}
	d.copies[k] = obj.DeepCopyObject().(T)
}

// released checks cur, the object the store held for k, against its copy
// and forgets the copy.
func (d *detector[T]) released(k Key, cur T) error {
	if d == nil {
		return nil
	}
	orig, ok := d.copies[k]
	delete(d.copies, k)
	if !ok {
		return nil
	}
	return d.compare(k, orig, cur)
}

func (d *detector[T]) compare(k Key, orig, cur T) error {
	if reflect.DeepEqual(orig, cur) {
		return nil
	}
	before, _ := json.Marshal(orig)
	after, _ := json.Marshal(cur)
	err := &mutationError{Key: k, Type: fmt.Sprintf("%T", cur), Before: string(before), After: string(after)}
	d.report(err)
	return err
}
