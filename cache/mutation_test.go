package cache_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/testenv"
)

// captureMutations swaps the detector's panic for a recorder for one test.
func captureMutations(t *testing.T) func() []error {
	var mu sync.Mutex
	var errs []error
	restore := cache.SetMutationHandler(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	})
	t.Cleanup(restore)
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

func TestMutationDetector_ReportsAReaderThatModifiedACachedObject(t *testing.T) {
	for name, release := range map[string]func(w *cache.Writer[*corev1.ConfigMap]){
		"on update":         func(w *cache.Writer[*corev1.ConfigMap]) { w.Apply(cm("ns", "a", "u1", "2"), "2") },
		"on delete":         func(w *cache.Writer[*corev1.ConfigMap]) { w.Delete(cm("ns", "a", "u1", "2"), "2") },
		"on replace":        func(w *cache.Writer[*corev1.ConfigMap]) { w.Replace(nil, "2") },
		"on CheckMutations": func(w *cache.Writer[*corev1.ConfigMap]) { _ = w.CheckMutations() },
	} {
		t.Run(name, func(t *testing.T) {
			reported := captureMutations(t)
			s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
			w.Apply(cm("ns", "a", "u1", "1"), "1")

			obj, _ := s.Get("ns", "a")
			obj.Data = map[string]string{"oops": "written through the cache"} // the bug under test

			release(w)
			errs := reported()
			var me *cache.MutationError
			if len(errs) != 1 || !errors.As(errs[0], &me) {
				t.Fatalf("detector reported %v, want one *MutationError", errs)
			}
			if me.Key != (cache.Key{Namespace: "ns", Name: "a"}) || !strings.Contains(me.After, "oops") {
				t.Errorf("report names %v with %q", me.Key, me.After)
			}
		})
	}
}

func TestMutationDetector_IsQuietForReadersThatCopyBeforeWriting(t *testing.T) {
	reported := captureMutations(t)
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
	w.Apply(cm("ns", "a", "u1", "1"), "1")
	obj, _ := s.Get("ns", "a")
	mine := cache.Copy(obj)
	mine.Data = map[string]string{"fine": "a private copy"}
	if err := w.CheckMutations(); err != nil {
		t.Fatal(err)
	}
	w.Apply(mine, mine.GetResourceVersion())
	w.Replace([]*corev1.ConfigMap{cm("ns", "b", "u2", "3")}, "3")
	if errs := reported(); len(errs) != 0 {
		t.Fatalf("detector reported %v for correct use", errs)
	}
}

func TestMutationDetector_IsOnInTests(t *testing.T) {
	defer func() {
		var me *cache.MutationError
		if r := recover(); r == nil {
			t.Fatal("a mutation in a test binary did not panic")
		} else if err, ok := r.(error); !ok || !errors.As(err, &me) {
			t.Fatalf("panicked with %v, want a *MutationError", r)
		}
	}()
	s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
	w.Apply(cm("ns", "a", "u1", "1"), "1")
	obj, _ := s.Get("ns", "a")
	obj.Labels = map[string]string{"mutated": "yes"}
	w.Apply(cm("ns", "a", "u1", "2"), "2")
}

// The environment variable, which testenv.DetectMutations sets for a test
// binary and its children, switches the detector on for stores created
// later, unless the program set the detector itself.
func TestMutationDetectorEnv_SwitchesItOnUnlessTheProgramSaysOtherwise(t *testing.T) {
	if testenv.MutationDetectorEnv != cache.MutationDetectorEnv {
		t.Fatalf("testenv sets %s, the cache reads %s", testenv.MutationDetectorEnv, cache.MutationDetectorEnv)
	}
	mutate := func() (panicked bool) {
		defer func() { panicked = recover() != nil }()
		s, w := newStore(t, cache.Options[*corev1.ConfigMap]{})
		w.Apply(cm("ns", "a", "u1", "1"), "1")
		obj, _ := s.Get("ns", "a")
		obj.Labels = map[string]string{"mutated": "yes"}
		w.Apply(cm("ns", "a", "u1", "2"), "2")
		return false
	}
	t.Setenv(cache.MutationDetectorEnv, "0")
	if mutate() {
		t.Fatal(cache.MutationDetectorEnv + "=0 left the detector on")
	}
	t.Setenv(cache.MutationDetectorEnv, "1")
	if !mutate() {
		t.Fatal(cache.MutationDetectorEnv + "=1 did not switch the detector on")
	}
	defer cache.SetMutationHandler(nil)()
	if mutate() {
		t.Fatal("the environment overrode the program switching the detector off")
	}
}
