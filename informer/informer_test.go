package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/watcher"
)

// fakeSource is a scripted Source: the test sends events, Run emits them.
// The channel is unbuffered, so when send returns the informer has queued
// the event.
type fakeSource struct {
	ch      chan watcher.Event[*corev1.ConfigMap]
	mu      sync.Mutex
	err     error
	changed chan struct{} // closed by setErr
}

func newFakeSource() *fakeSource {
	return &fakeSource{ch: make(chan watcher.Event[*corev1.ConfigMap])}
}

func (s *fakeSource) Run(ctx context.Context, emit func(watcher.Event[*corev1.ConfigMap])) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-s.ch:
			emit(e)
		}
	}
}

func (s *fakeSource) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *fakeSource) setErr(err error) {
	s.mu.Lock()
	s.err = err
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

func (s *fakeSource) ErrorChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *fakeSource) send(evs ...watcher.Event[*corev1.ConfigMap]) {
	for _, e := range evs {
		s.ch <- e
	}
}

func (s *fakeSource) relist(rv string, objs ...*corev1.ConfigMap) {
	s.send(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart})
	for _, o := range objs {
		s.send(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistItem, Object: o})
	}
	s.send(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistDone, ResourceVersion: rv})
}

type harness struct {
	inf  *Informer[*corev1.ConfigMap]
	src  *fakeSource
	reg  *prometheus.Registry
	logs *await.Buffer
	stop func()
}

// start runs an informer over a fake source; call inside a synctest bubble.
func start(t *testing.T, opts Options[*corev1.ConfigMap], before ...func(*Informer[*corev1.ConfigMap])) *harness {
	t.Helper()
	h := &harness{src: newFakeSource(), reg: prometheus.NewRegistry(), logs: &await.Buffer{}}
	opts.Registerer = h.reg
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	inf, err := New[*corev1.ConfigMap](h.src, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.inf = inf
	for _, f := range before {
		f(inf)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- inf.Start(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}
	return h
}

// recorder is a Handler that logs its calls and keeps the view they build.
type recorder struct {
	mu    sync.Mutex
	calls []string
	view  map[string]string // name → resourceVersion
	gate  chan struct{}     // if set, every call waits for a token
}

func newRecorder() *recorder { return &recorder{view: map[string]string{}} }

func (r *recorder) wait() {
	if r.gate != nil {
		<-r.gate
	}
}

func (r *recorder) OnAdd(obj *corev1.ConfigMap, initial bool) {
	r.wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("add %s@%s initial=%v", obj.Name, obj.ResourceVersion, initial))
	r.view[obj.Name] = obj.ResourceVersion
}

func (r *recorder) OnUpdate(old, new *corev1.ConfigMap) {
	r.wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("update %s@%s>%s", new.Name, old.ResourceVersion, new.ResourceVersion))
	r.view[new.Name] = new.ResourceVersion
}

func (r *recorder) OnDelete(obj *corev1.ConfigMap, finalStateUnknown bool) {
	r.wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("delete %s@%s unknown=%v", obj.Name, obj.ResourceVersion, finalStateUnknown))
	delete(r.view, obj.Name)
}

// OnEvent implements Handler through the per-kind methods above.
func (r *recorder) OnEvent(e cache.Event[*corev1.ConfigMap]) {
	HandlerFuncs[*corev1.ConfigMap]{AddFunc: r.OnAdd, UpdateFunc: r.OnUpdate, DeleteFunc: r.OnDelete}.OnEvent(e)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	slices.Sort(out)
	return out
}

func (r *recorder) snapshot() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.view)
}

func add(t *testing.T, inf *Informer[*corev1.ConfigMap], h Handler[*corev1.ConfigMap], opts HandlerOptions) *Registration {
	t.Helper()
	reg, err := inf.AddHandler(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func storeView(inf *Informer[*corev1.ConfigMap]) string {
	m := map[string]string{}
	for _, o := range inf.Lister().List(nil) {
		m[o.Name] = o.ResourceVersion
	}
	return fmt.Sprint(m)
}

func TestInformer_DeliversTheInitialListThenEachChange(t *testing.T) {
	for _, mem := range []Memory{{}, {Encoded: true}} {
		t.Run(fmt.Sprintf("Encoded=%v", mem.Encoded), func(t *testing.T) { testDeliversTheInitialListThenEachChange(t, mem) })
	}
}

func testDeliversTheInitialListThenEachChange(t *testing.T, mem Memory) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{Memory: mem}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()

		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait()
		if !closed(h.inf.Synced()) {
			t.Fatal("informer not synced after its first snapshot")
		}
		equal(t, rec.take(), []string{"add a@1 initial=true", "add b@2 initial=true"})

		h.src.send(ev(watcher.Modified, cm("a", "1", "3")), ev(watcher.Added, cm("c", "3", "4")), ev(watcher.Deleted, cm("b", "2", "5")))
		synctest.Wait()
		equal(t, rec.take(), []string{"add c@4 initial=false", "delete b@5 unknown=false", "update a@1>3"})
		if got := h.inf.Lister().ResourceVersion(); got != "5" {
			t.Errorf("cache at resourceVersion %q, want 5", got)
		}

		// A relist that lacks "c" and changed "a": deletes are final-state-unknown.
		h.src.relist("9", cm("a", "1", "7"))
		synctest.Wait()
		equal(t, rec.take(), []string{"delete c@4 unknown=true", "update a@3>7"})
		if storeView(h.inf) != rec.snapshot() {
			t.Errorf("handler view %s, cache %s", rec.snapshot(), storeView(h.inf))
		}
	})
}

func TestInformer_ARelistStartedAgainHalfWayKeepsNothingOfTheUnfinishedOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()

		// A streaming list emits its items as they arrive; this one fails
		// after two, and the reflector starts the listing again.
		h.src.send(watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart},
			ev(watcher.RelistItem, cm("gone", "1", "1")), ev(watcher.RelistItem, cm("a", "2", "2")))
		synctest.Wait()
		if closed(h.inf.Synced()) || h.inf.Lister().Len() != 0 {
			t.Fatalf("an unfinished snapshot reached the cache (synced %v, %d objects)", closed(h.inf.Synced()), h.inf.Lister().Len())
		}
		h.src.relist("5", cm("a", "2", "3"), cm("b", "3", "4"))
		synctest.Wait()
		if !closed(h.inf.Synced()) {
			t.Fatal("informer not synced after the restarted snapshot completed")
		}
		if got := storeView(h.inf); got != "map[a:3 b:4]" {
			t.Errorf("cache %s, want the restarted snapshot only", got)
		}
		equal(t, rec.take(), []string{"add a@3 initial=true", "add b@4 initial=true"})
		if strings.Contains(h.logs.String(), "out of list/watch protocol") {
			t.Errorf("a restarted relist was logged as a protocol violation:\n%s", h.logs.String())
		}
	})
}

func TestInformer_SlowHandlerDelaysNeitherOtherHandlersNorTheCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, fast := newRecorder(), newRecorder()
		slow.gate = make(chan struct{})
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			add(t, inf, slow, HandlerOptions{Name: "slow"})
			add(t, inf, fast, HandlerOptions{Name: "fast"})
		})
		defer h.stop()

		h.src.relist("1", cm("a", "1", "1"))
		for i := 2; i <= 500; i++ {
			h.src.send(ev(watcher.Modified, cm("a", "1", fmt.Sprint(i))))
		}
		h.src.send(ev(watcher.Added, cm("b", "2", "501")))
		synctest.Wait() // the slow handler is stuck in its first call

		if v := fast.snapshot(); v != "map[a:500 b:501]" {
			t.Errorf("fast handler has %s while another handler is stuck", v)
		}
		if v := storeView(h.inf); v != "map[a:500 b:501]" {
			t.Errorf("cache %s while a handler is stuck", v)
		}
		// The stuck handler's backlog is one merged entry per key.
		if n := queued(h.inf, "slow"); n > 2 {
			t.Errorf("stuck handler has %d notifications queued for 2 keys", n)
		}
		close(slow.gate)
		synctest.Wait()
		if slow.snapshot() != "map[a:500 b:501]" {
			t.Errorf("slow handler ended with %s", slow.snapshot())
		}
	})
}

// A key that changes more often than a slow handler drains its queue must
// still reach the handler. Each round one of five other keys changes, then
// the hot key, then the handler finishes one call. Were a changed key moved
// to the back of the queue, the hot key would always be last and never
// delivered.
func TestInformer_HotKeyIsNotStarvedBySlowHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.gate = make(chan struct{})
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()
		released := false
		defer func() {
			if !released {
				close(rec.gate)
			}
		}()
		const others, rounds = 5, 50
		h.src.relist("1", cm("hot", "h", "1"))
		synctest.Wait() // the handler is in its first call, OnAdd(hot)

		rv := 1
		for i := range rounds {
			rv++
			k := fmt.Sprintf("k%d", i%others)
			h.src.send(ev(watcher.Modified, cm(k, k, fmt.Sprint(rv))))
			synctest.Wait()
			rv++
			h.src.send(ev(watcher.Modified, cm("hot", "h", fmt.Sprint(rv))))
			synctest.Wait()
			rec.gate <- struct{}{} // finish one call; the handler takes the next
			synctest.Wait()
		}
		rec.mu.Lock()
		calls := slices.Clone(rec.calls)
		rec.mu.Unlock()
		// The bound: the queue holds one entry per key, and the hot key
		// keeps its place, so at most the other keys are delivered between
		// two deliveries of the hot key.
		hot, gap, maxGap := 0, 0, 0
		for _, c := range calls[1:] { // after the initial add
			if strings.Contains(c, " hot@") {
				hot++
				gap = 0
				continue
			}
			gap++
			maxGap = max(maxGap, gap)
		}
		if hot < rounds/(others+1) || maxGap > others {
			t.Fatalf("hot key delivered %d times in %d handler calls, with up to %d other calls in a row; want at most %d\ncalls: %q",
				hot, len(calls)-1, maxGap, others, calls)
		}
		close(rec.gate)
		released = true
		synctest.Wait()
		if got, want := rec.snapshot(), storeView(h.inf); got != want {
			t.Fatalf("handler view %s, cache %s", got, want)
		}
	})
}

// holdBack holds back the informer's processor, the side that applies
// queued deltas to the cache, by way of the Filter, which the informer
// calls twice per event: on the reflector's goroutine as it queues the
// event, then on the processor's as it applies it. The first call passes;
// the second records the object and waits for a token on step (or for
// step to be closed).
type holdBack struct {
	once    sync.Once // closes step
	mu      sync.Mutex
	queued  map[*corev1.ConfigMap]bool
	applied []string
	step    chan struct{}
}

func newHoldBack() *holdBack {
	return &holdBack{queued: map[*corev1.ConfigMap]bool{}, step: make(chan struct{})}
}

func (h *holdBack) filter(o *corev1.ConfigMap) bool {
	h.mu.Lock()
	first := !h.queued[o]
	h.queued[o] = true
	h.mu.Unlock()
	if first {
		return true
	}
	<-h.step
	h.mu.Lock()
	h.applied = append(h.applied, o.Name+"@"+o.ResourceVersion)
	h.mu.Unlock()
	return true
}

// startHoldingA2 starts an informer whose processor holdBack holds, lists
// it empty and sends a@2, which the processor then holds. Run it in a
// synctest bubble; defer h.stop() and hb.release().
func startHoldingA2(t *testing.T) (*harness, *holdBack) {
	hb := newHoldBack()
	h := start(t, Options[*corev1.ConfigMap]{Filter: hb.filter})
	h.src.relist("1")
	h.src.send(ev(watcher.Added, cm("a", "a", "2")))
	synctest.Wait() // the processor holds a@2
	return h, hb
}

// release lets the processor go on without holding it again; it may be
// called more than once.
func (h *holdBack) release() { h.once.Do(func() { close(h.step) }) }

func (h *holdBack) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.applied)
}

// While the cache falls behind, a key that changes again keeps its place
// in line, so keys reach the cache in the order they first changed, and the
// cache's resourceVersion never claims a change still waiting.
func TestInformer_CacheFallingBehindAppliesKeysInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, hb := startHoldingA2(t)
		defer h.stop()
		defer hb.release()
		h.src.send(ev(watcher.Added, cm("b", "b", "3")), ev(watcher.Added, cm("c", "c", "4")),
			ev(watcher.Modified, cm("b", "b", "5")), ev(watcher.Added, cm("d", "d", "6")),
			ev(watcher.Modified, cm("a", "a", "7")))
		sent := []*corev1.ConfigMap{cm("a", "a", "2"), cm("b", "b", "3"), cm("c", "c", "4"), cm("b", "b", "5"), cm("d", "d", "6"), cm("a", "a", "7")}
		for range 5 {
			hb.step <- struct{}{}
			synctest.Wait()
			holdsAllUpToItsRV(t, h.inf.Lister(), sent)
		}
		equal(t, hb.take(), []string{"a@2", "b@5", "c@4", "d@6", "a@7"})
		if rv := h.inf.Lister().ResourceVersion(); rv != "7" {
			t.Errorf("cache ended at resourceVersion %s, want 7", rv)
		}
		hb.release()
		if v := storeView(h.inf); v != "map[a:7 b:5 c:4 d:6]" {
			t.Errorf("cache ended with %s", v)
		}
	})
}

// holdsAllUpToItsRV fails t unless the cache holds every change of sent
// at or below its resourceVersion: it may apply a burst of changes at once,
// so its resourceVersion may stay put while the burst is filtered, but it
// never claims a change still waiting.
func holdsAllUpToItsRV(t *testing.T, lister cache.Lister[*corev1.ConfigMap], sent []*corev1.ConfigMap) {
	t.Helper()
	rv, _ := strconv.Atoi(lister.ResourceVersion())
	for _, o := range sent {
		want, _ := strconv.Atoi(o.ResourceVersion)
		if want > rv {
			continue
		}
		held := 0
		if got, ok := lister.Get(o.Namespace, o.Name); ok {
			held, _ = strconv.Atoi(got.ResourceVersion)
		}
		if held < want {
			t.Fatalf("cache at resourceVersion %d lacks %s@%d (holds it at %d)", rv, o.Name, want, held)
		}
	}
}

// A backlog longer than one burst the processor applies at once
// (applyBatch) ends the burst between keys: a key whose change was merged
// with a later one, applied in the first burst, must not take the cache's
// resourceVersion past a key still waiting for the next.
func TestInformer_ABurstEndingMidBacklogClaimsNoChangeStillWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, hb := startHoldingA2(t)
		defer h.stop()
		defer hb.release()
		// hot@3, then applyBatch keys, then hot again: hot's change joins
		// its place at the head of the line, the last key falls into the
		// next burst.
		sent := []*corev1.ConfigMap{cm("a", "a", "2"), cm("hot", "hot", "3")}
		for i := range applyBatch {
			sent = append(sent, cm(fmt.Sprintf("k%03d", i), "k", strconv.Itoa(4+i)))
		}
		sent = append(sent, cm("hot", "hot", strconv.Itoa(4+applyBatch)))
		var evs []watcher.Event[*corev1.ConfigMap]
		for _, o := range sent[1:] {
			evs = append(evs, ev(watcher.Added, o))
		}
		h.src.send(evs...)
		for range len(sent) - 1 { // every key once, hot once
			hb.step <- struct{}{}
			synctest.Wait()
			holdsAllUpToItsRV(t, h.inf.Lister(), sent)
		}
		hb.release()
		synctest.Wait()
		if rv, want := h.inf.Lister().ResourceVersion(), strconv.Itoa(4+applyBatch); rv != want {
			t.Errorf("cache ended at resourceVersion %s, want %s", rv, want)
		}
	})
}

// A key that changes on every step while the cache lags behind other keys
// changing is still applied: after at most the keys ahead of it in line,
// and those applied in one burst with it (the processor applies what is
// queued a burst at a time, see applySome). Were a changed key moved to the
// back, the hot key would always be last and never reach the cache.
func TestInformer_HotKeyReachesACacheThatFallsBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hb := newHoldBack()
		h := start(t, Options[*corev1.ConfigMap]{Filter: hb.filter})
		defer h.stop()
		defer hb.release()
		const others, rounds = 5, 60
		h.src.relist("1")
		rv := 1
		for i := range others {
			rv++
			h.src.send(ev(watcher.Added, cm(fmt.Sprintf("k%d", i), "k", fmt.Sprint(rv))))
		}
		rv++
		h.src.send(ev(watcher.Added, cm("hot", "h", fmt.Sprint(rv))))
		synctest.Wait() // the processor holds k0; k1…k4 and hot wait
		for i := range rounds {
			rv++
			k := fmt.Sprintf("k%d", i%others)
			h.src.send(ev(watcher.Modified, cm(k, "k", fmt.Sprint(rv))))
			rv++
			h.src.send(ev(watcher.Modified, cm("hot", "h", fmt.Sprint(rv))))
			hb.step <- struct{}{} // apply one; the processor takes the next
			synctest.Wait()
		}
		applied := hb.take()
		// The bound: at most the other keys are applied before the hot key
		// first; between two of its applications, at most those applied
		// after it in its burst and those queued ahead of its next change,
		// each other key once: twice the other keys.
		hot, gap, maxGap := 0, 0, 0
		for _, a := range applied {
			if strings.HasPrefix(a, "hot@") {
				hot++
				gap = 0
				continue
			}
			gap++
			maxGap = max(maxGap, gap)
		}
		if hot < rounds/(2*others+1) || maxGap > 2*others {
			t.Fatalf("hot key applied %d times in %d applications, with up to %d others in a row; want at most %d\napplied: %q",
				hot, len(applied), maxGap, 2*others, applied)
		}
		hb.release()
		synctest.Wait()
		if got := h.inf.Lister().ResourceVersion(); got != fmt.Sprint(rv) {
			t.Errorf("cache at resourceVersion %s after catching up, want %d", got, rv)
		}
	})
}

func queued(inf *Informer[*corev1.ConfigMap], handler string) int {
	inf.dispatchMu.Lock()
	defer inf.dispatchMu.Unlock()
	for _, sub := range inf.subs {
		if l, ok := sub.(*listener[*corev1.ConfigMap]); ok && l.name == handler {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.q.len()
		}
	}
	return -1
}

func TestInformer_HandlerAddedLaterGetsTheCacheReplayedAndItsOwnSyncedSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{})
		defer h.stop()
		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait()

		late := newRecorder()
		late.gate = make(chan struct{})
		reg := add(t, h.inf, late, HandlerOptions{})
		synctest.Wait()
		if closed(reg.Synced()) {
			t.Fatal("registration synced before its handler saw the replay")
		}
		late.gate <- struct{}{}
		synctest.Wait()
		if closed(reg.Synced()) {
			t.Fatal("registration synced after one of two replayed objects")
		}
		close(late.gate)
		synctest.Wait()
		if !closed(reg.Synced()) {
			t.Fatal("registration not synced after its replay was delivered")
		}
		equal(t, late.take(), []string{"add a@1 initial=true", "add b@2 initial=true"})
		if err := reg.WaitForSync(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestInformer_RegistrationSyncsOnlyWhenItsHandlerHasTheInitialList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := newRecorder()
		slow.gate = make(chan struct{})
		var reg *Registration
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { reg = add(t, inf, slow, HandlerOptions{}) })
		defer h.stop()
		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait() // the handler is stuck in its first add
		// Updates to both objects: the one in flight is queued as an update,
		// the other merges into its pending add, which still belongs to the
		// initial state even though it moved to the back of the queue.
		h.src.send(ev(watcher.Modified, cm("a", "1", "3")), ev(watcher.Modified, cm("b", "2", "4")))
		synctest.Wait()
		if !closed(h.inf.Synced()) {
			t.Fatal("informer not synced")
		}
		for i := range 2 {
			if closed(reg.Synced()) {
				t.Fatalf("registration synced after %d of 3 deliveries", i)
			}
			slow.gate <- struct{}{}
			synctest.Wait()
		}
		slow.gate <- struct{}{}
		synctest.Wait()
		if !closed(reg.Synced()) {
			t.Fatal("registration not synced after its initial adds were delivered")
		}
		close(slow.gate)
		calls := slow.take()
		if len(calls) != 3 || slow.snapshot() != "map[a:3 b:4]" {
			t.Fatalf("calls %q, view %s", calls, slow.snapshot())
		}
	})
}

func TestInformer_RemoveReturnsAtOnceAndDoneClosesWhenTheRunningCallbackReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.gate = make(chan struct{})
		var reg *Registration
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { reg = add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()
		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait() // the handler is inside its first callback

		reg.Remove() // returns although the callback is still running
		synctest.Wait()
		if closed(reg.Done()) {
			t.Fatal("Done closed while the handler's callback was still running")
		}
		rec.gate <- struct{}{}
		synctest.Wait()
		if !closed(reg.Done()) {
			t.Fatal("Done not closed after the running callback returned")
		}
		if n := len(rec.take()); n != 1 {
			t.Fatalf("handler got %d calls, want only the one in flight at Remove", n)
		}
		h.src.send(ev(watcher.Added, cm("c", "3", "3")))
		synctest.Wait()
		if n := len(rec.take()); n != 0 {
			t.Fatalf("removed handler got %d more calls", n)
		}
		reg.Remove() // idempotent
	})
}

func TestInformer_RemoveBeforeStartClosesDoneAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		var reg *Registration
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			reg = add(t, inf, rec, HandlerOptions{})
			if closed(reg.Done()) {
				t.Error("Done closed for a registration that can still be called")
			}
			reg.Remove()
			if !closed(reg.Done()) {
				t.Error("Done not closed by Remove of a handler that never ran")
			}
		})
		defer h.stop()
		h.src.relist("1", cm("a", "1", "1"))
		synctest.Wait()
		if n := len(rec.take()); n != 0 {
			t.Fatalf("handler removed before the start got %d calls", n)
		}
	})
}

func TestInformer_DoneClosesWhenTheInformerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reg *Registration
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { reg = add(t, inf, newRecorder(), HandlerOptions{}) })
		h.src.relist("1", cm("a", "1", "1"))
		synctest.Wait()
		if closed(reg.Done()) {
			t.Fatal("Done closed while the informer runs")
		}
		h.stop()
		if !closed(reg.Done()) {
			t.Fatal("Done not closed after the informer stopped")
		}
	})
}

func TestInformer_RemoveFromInsideTheHandlerDoesNotDeadlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reg *Registration
		var mu sync.Mutex
		calls := 0
		h := start(t, Options[*corev1.ConfigMap]{})
		defer h.stop()
		reg = add(t, h.inf, HandlerFuncs[*corev1.ConfigMap]{AddFunc: func(*corev1.ConfigMap, bool) {
			mu.Lock()
			calls++
			mu.Unlock()
			reg.Remove()
			if closed(reg.Done()) {
				t.Error("Done closed while the callback that called Remove still runs")
			}
		}}, HandlerOptions{})
		h.src.relist("3", cm("a", "1", "1"), cm("b", "2", "2"), cm("c", "3", "3"))
		synctest.Wait() // a deadlock here fails the bubble
		if !closed(reg.Done()) {
			t.Fatal("Done not closed after the callback that called Remove returned")
		}
		mu.Lock()
		defer mu.Unlock()
		if calls != 1 {
			t.Fatalf("handler called %d times; the callback that removed it must be the last", calls)
		}
	})
}

func TestInformer_ReplayIntervalRedeliversCachedObjectsWithoutARelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		replayed, plain := newRecorder(), newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			add(t, inf, replayed, HandlerOptions{ReplayInterval: time.Minute})
			add(t, inf, plain, HandlerOptions{})
		})
		defer h.stop()
		h.src.relist("2", cm("a", "1", "1"), cm("b", "2", "2"))
		synctest.Wait()
		replayed.take()
		plain.take()

		time.Sleep(time.Minute) // virtual time: one replay interval
		synctest.Wait()
		equal(t, replayed.take(), []string{"update a@1>1", "update b@2>2"})
		equal(t, plain.take(), nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		equal(t, replayed.take(), []string{"update a@1>1", "update b@2>2"})
	})
}

func TestInformer_PanickingHandlerIsRecoveredLoggedAndCountedWhileOthersGoOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		good := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			add(t, inf, HandlerFuncs[*corev1.ConfigMap]{
				AddFunc:    func(*corev1.ConfigMap, bool) { panic("boom on add") },
				UpdateFunc: func(_, _ *corev1.ConfigMap) { panic("boom on update") },
				DeleteFunc: func(*corev1.ConfigMap, bool) { panic("boom on delete") },
			}, HandlerOptions{Name: "broken"})
			add(t, inf, good, HandlerOptions{Name: "good"})
		})
		defer h.stop()
		h.src.relist("1", cm("a", "1", "1"))
		synctest.Wait()
		h.src.send(ev(watcher.Modified, cm("a", "1", "2")))
		synctest.Wait()
		h.src.send(ev(watcher.Deleted, cm("a", "1", "3")), ev(watcher.Added, cm("b", "2", "4")))
		synctest.Wait()

		equal(t, good.take(), []string{"add a@1 initial=true", "add b@4 initial=false", "delete a@3 unknown=false", "update a@1>2"})
		if v := storeView(h.inf); v != "map[b:4]" {
			t.Errorf("cache %s", v)
		}
		if n := counterValue(t, h.reg, "kloop_informer_handler_panics_total", "broken"); n < 3 {
			t.Errorf("handler_panics_total{handler=broken} = %v, want >= 3", n)
		}
		if logs := h.logs.String(); !strings.Contains(logs, "boom on delete") || !strings.Contains(logs, "handler=broken") {
			t.Errorf("panic not logged with the handler's name:\n%s", logs)
		}
	})
}

func counterValue(t *testing.T, reg *prometheus.Registry, name, handler string) float64 {
	t.Helper()
	v, _ := metricstest.Find(t, reg, name, "handler", handler)
	return v
}

func TestInformer_StripsManagedFieldsByDefault(t *testing.T) {
	withFields := func() *corev1.ConfigMap {
		o := cm("a", "1", "1")
		o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		return o
	}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepManagedFields=%v", keep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, Options[*corev1.ConfigMap]{Memory: Memory{KeepManagedFields: keep}, Transform: func(o *corev1.ConfigMap) *corev1.ConfigMap {
					o.Annotations = map[string]string{"transformed": "yes"}
					return o
				}})
				defer h.stop()
				h.src.relist("1", withFields())
				synctest.Wait()
				o, _ := h.inf.Lister().Get("ns", "a")
				if got := len(o.ManagedFields) > 0; got != keep {
					t.Errorf("managedFields kept=%v, want %v", got, keep)
				}
				if o.Annotations["transformed"] != "yes" {
					t.Error("Transform did not run")
				}
			})
		})
	}
}

func TestInformer_SetTransform_KeepsOnlyWhatItReturnsInTheCacheAndForHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		var seen []string
		var deletedData []int
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			add(t, inf, rec, HandlerOptions{})
			add(t, inf, HandlerFuncs[*corev1.ConfigMap]{
				DeleteFunc: func(obj *corev1.ConfigMap, finalStateUnknown bool) { deletedData = append(deletedData, len(obj.Data)) },
			}, HandlerOptions{})
			err := inf.SetTransform(func(o *corev1.ConfigMap) *corev1.ConfigMap {
				seen = append(seen, fmt.Sprintf("%s@%s managedFields=%d", o.Name, o.ResourceVersion, len(o.ManagedFields)))
				o.Data = nil
				return o
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := inf.SetTransform(func(o *corev1.ConfigMap) *corev1.ConfigMap { return o }); !errors.Is(err, ErrTransformSet) {
				t.Errorf("a second SetTransform = %v, want ErrTransformSet", err)
			}
		})
		defer h.stop()
		withData := func(name, uid, rv string) *corev1.ConfigMap {
			o := cm(name, uid, rv)
			o.Data = map[string]string{"payload": "big"}
			o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			return o
		}
		h.src.relist("2", withData("a", "1", "1"), withData("b", "2", "2"))
		synctest.Wait() // handlers have the adds, so the delete is not merged into them
		h.src.send(ev(watcher.Modified, withData("a", "1", "3")), ev(watcher.Deleted, withData("b", "2", "4")))
		synctest.Wait()

		slices.Sort(seen)
		equal(t, seen, []string{"a@1 managedFields=0", "a@3 managedFields=0", "b@2 managedFields=0", "b@4 managedFields=0"})
		for _, o := range h.inf.Lister().List(nil) {
			if o.Data != nil {
				t.Errorf("cached %s has Data %v after a transform that drops it", o.Name, o.Data)
			}
		}
		if len(deletedData) != 1 || deletedData[0] != 0 {
			t.Errorf("OnDelete saw Data of length %v, want the transformed final state (0)", deletedData)
		}
		if err := h.inf.SetTransform(func(o *corev1.ConfigMap) *corev1.ConfigMap { return o }); !errors.Is(err, ErrAlreadyStarted) {
			t.Errorf("SetTransform on a running informer = %v, want ErrAlreadyStarted", err)
		}
	})
}

func TestInformer_DeleteAndRecreateCoalescedAwayIsReportedAsDeleteThenAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) { add(t, inf, rec, HandlerOptions{}) })
		defer h.stop()
		h.src.relist("1", cm("a", "old-uid", "1"))
		synctest.Wait()
		rec.take()
		// The cache applies deltas per key; if the delete and the new add
		// arrive together they coalesce to the add of another UID.
		h.inf.qmu.Lock()
		h.inf.queue.push(ev(watcher.Deleted, cm("a", "old-uid", "2")))
		h.inf.queue.push(ev(watcher.Added, cm("a", "new-uid", "3")))
		h.inf.qmu.Unlock()
		h.inf.qwake <- struct{}{}
		synctest.Wait()
		equal(t, rec.take(), []string{"add a@3 initial=false", "delete a@1 unknown=true"})
	})
}

func TestInformer_WaitForSyncNamesTheInformerAndKeepsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{Name: "configmaps.v1 [namespace=web]"})
		defer h.stop()
		h.src.setErr(fmt.Errorf("list configmaps: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "")))

		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		err := h.inf.WaitForSync(ctx)
		var se *SyncError
		if !errors.As(err, &se) || se.Informer != "configmaps.v1 [namespace=web]" {
			t.Fatalf("err = %v, want a *SyncError naming the informer", err)
		}
		if !apierrors.IsNotFound(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v: want it to be both NotFound and DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), "not found") {
			t.Errorf("message does not say not found: %v", err)
		}
	})
}

func TestInformer_WaitForSyncReturnsAsSoonAsTheInformerIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{Name: "configmaps.v1 [namespace=web]"})
		defer h.stop()
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		began := time.Now()
		done := make(chan error, 1)
		go func() { done <- h.inf.WaitForSync(ctx) }()
		time.Sleep(time.Minute) // fake time: a healthy but slow sync, then the refusal
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("WaitForSync returned %v before any error", err)
		default:
		}
		h.src.setErr(fmt.Errorf("list configmaps: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "bob" cannot list resource "configmaps"`))))
		err := <-done
		if waited := time.Since(began); waited != time.Minute {
			t.Errorf("WaitForSync returned %v after it began, want at the refusal (1m), not at the deadline", waited)
		}
		if !apierrors.IsForbidden(err) || !errors.Is(err, ErrRefused) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v: want Forbidden and ErrRefused", err)
		}
		if !strings.Contains(err.Error(), `cannot list resource "configmaps"`) {
			t.Errorf("message does not name the verb and resource: %v", err)
		}
		// The informer keeps trying; once permission comes it syncs.
		h.src.setErr(nil)
		h.src.relist("5")
		if err := h.inf.WaitForSync(ctx); err != nil {
			t.Fatalf("WaitForSync after the permission came: %v", err)
		}
	})
}

func TestInformer_WaitForSyncOfAnInformerNobodyRunsSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inf, err := New[*corev1.ConfigMap](newFakeSource(), Options[*corev1.ConfigMap]{Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := inf.WaitForSync(ctx); !errors.Is(err, ErrNotStarted) {
			t.Fatalf("err = %v, want ErrNotStarted", err)
		}
	})
}

func TestInformer_RunsOnceAndRefusesHandlersAfterStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{})
		synctest.Wait()
		if err := h.inf.Start(t.Context()); !errors.Is(err, ErrAlreadyStarted) {
			t.Errorf("second Run: %v, want ErrAlreadyStarted", err)
		}
		h.stop()
		if _, err := h.inf.AddHandler(newRecorder(), HandlerOptions{}); !errors.Is(err, ErrStopped) {
			t.Errorf("AddHandler after stop: %v, want ErrStopped", err)
		}
	})
}

func TestInformer_AddIndexAfterSyncIndexesWhatIsCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{})
		defer h.stop()
		a := cm("a", "1", "1")
		a.Labels = map[string]string{"app": "x"}
		h.src.relist("2", a, cm("b", "2", "2"))
		synctest.Wait()
		if err := h.inf.AddIndex(cache.IndexLabel, cache.LabelIndexFunc[*corev1.ConfigMap]); err != nil {
			t.Fatal(err)
		}
		got, err := h.inf.Lister().ByIndex(cache.IndexLabel, "app=x")
		if err != nil || len(got) != 1 || got[0].Name != "a" {
			t.Fatalf("ByIndex = %v, %v", got, err)
		}
	})
}

func TestInformer_SharesRepeatedMetadataBetweenCachedObjectsUnlessDisabled(t *testing.T) {
	labelled := func(name, uid, rv string) *corev1.ConfigMap {
		o := cm(name, uid, rv)
		o.Labels = map[string]string{"app": "web", "tier": "front"}
		o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-1"}}
		// Each object its own key string, as decoding gives them.
		o.Annotations = map[string]string{strings.Clone("example.com/note"): "for " + name}
		o.Data = map[string]string{strings.Clone("config"): "for " + name}
		return o
	}
	dataKey := func(o *corev1.ConfigMap) *byte {
		for k := range o.Data {
			return unsafe.StringData(k)
		}
		return nil
	}
	annotationKey := func(o *corev1.ConfigMap) *byte {
		for k := range o.Annotations {
			return unsafe.StringData(k)
		}
		return nil
	}
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("Unshared=%v", disable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, Options[*corev1.ConfigMap]{Memory: Memory{Unshared: disable}})
				defer h.stop()
				objA := labelled("a", "1", "1")
				decodedAnnotations := reflect.ValueOf(objA.Annotations).UnsafePointer()
				h.src.relist("2", objA, labelled("b", "2", "2"))
				synctest.Wait()
				a, _ := h.inf.Lister().Get("ns", "a")
				b, _ := h.inf.Lister().Get("ns", "b")
				if fmt.Sprint(a.Labels) != "map[app:web tier:front]" || a.OwnerReferences[0].Name != "web-1" {
					t.Fatalf("cached object changed: %v %v", a.Labels, a.OwnerReferences)
				}
				sameLabels := reflect.ValueOf(a.Labels).UnsafePointer() == reflect.ValueOf(b.Labels).UnsafePointer()
				sameOwners := &a.OwnerReferences[0] == &b.OwnerReferences[0]
				if sameLabels == disable || sameOwners == disable {
					t.Errorf("labels shared=%v, owner references shared=%v; want %v", sameLabels, sameOwners, !disable)
				}
				// Annotation keys are shared, values and maps are each object's own.
				if a.Annotations["example.com/note"] != "for a" || b.Annotations["example.com/note"] != "for b" || len(a.Annotations) != 1 {
					t.Fatalf("cached annotations changed: %v %v", a.Annotations, b.Annotations)
				}
				if sameKey := annotationKey(a) == annotationKey(b); sameKey == disable {
					t.Errorf("annotation keys shared=%v; want %v", sameKey, !disable)
				}
				if reflect.ValueOf(a.Annotations).UnsafePointer() != decodedAnnotations {
					t.Error("the cached object has a new annotations map, want the decoded one kept (no copy per object)")
				}
				// So are the keys of Data, and the object's own strings
				// are packed in one allocation.
				if a.Data["config"] != "for a" || b.Data["config"] != "for b" || len(a.Data) != 1 {
					t.Fatalf("cached data changed: %v %v", a.Data, b.Data)
				}
				if sameKey := dataKey(a) == dataKey(b); sameKey == disable {
					t.Errorf("data keys shared=%v; want %v", sameKey, !disable)
				}
				if a.Name != "a" || a.UID != "1" || a.ResourceVersion != "1" {
					t.Fatalf("cached metadata changed: %q %q %q", a.Name, a.UID, a.ResourceVersion)
				}
				packed := unsafe.Add(unsafe.Pointer(unsafe.StringData(a.Name)), len(a.Name)) == unsafe.Pointer(unsafe.StringData(string(a.UID)))
				if packed == disable {
					t.Errorf("name and UID in one allocation=%v; want %v", packed, !disable)
				}
			})
		})
	}
}

func TestInformer_WaitForSyncReturnsAtOnceWhenTheInformerStopsUnsynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options[*corev1.ConfigMap]{})
		reg := add(t, h.inf, newRecorder(), HandlerOptions{Name: "r"})
		synctest.Wait()
		h.stop()
		// No deadline: returning at all shows it did not wait for one.
		for _, err := range []error{h.inf.WaitForSync(t.Context()), reg.WaitForSync(t.Context())} {
			if !errors.Is(err, ErrStopped) {
				t.Errorf("err = %v, want ErrStopped", err)
			}
		}
	})
}

func TestInformer_SeededCacheTurnsTheFirstSnapshotIntoTheDifference(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		h := start(t, Options[*corev1.ConfigMap]{}, func(inf *Informer[*corev1.ConfigMap]) {
			if err := inf.Seed(cm("kept", "1", "1"), cm("changed", "2", "2"), cm("gone", "3", "3")); err != nil {
				t.Fatal(err)
			}
			add(t, inf, rec, HandlerOptions{})
		})
		defer h.stop()
		synctest.Wait()
		equal(t, rec.take(), nil) // nothing before the first snapshot

		h.src.relist("9", cm("kept", "1", "1"), cm("changed", "2", "5"), cm("new", "4", "6"))
		synctest.Wait()
		equal(t, rec.take(), []string{"add new@6 initial=true", "delete gone@3 unknown=true", "update changed@2>5"})
		if storeView(h.inf) != "map[changed:5 kept:1 new:6]" {
			t.Errorf("cache %s after the snapshot", storeView(h.inf))
		}
		if err := h.inf.Seed(cm("late", "5", "7")); err == nil {
			t.Error("Seed after Start = nil, want an error")
		}
	})
}

// An encoded cache hands a handler the first snapshot's objects by key,
// decoding each as it is delivered; a change of a key still waiting there
// takes its place, as a change of any queued key does.
func TestInformer_EncodedCacheDeliversASnapshotKeyByKeyWithLaterChangesMerged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.gate = make(chan struct{})
		var (
			reg   *Registration
			mu    sync.Mutex
			first string // the key the handler's first call, stuck on the gate, was given
		)
		h := start(t, Options[*corev1.ConfigMap]{Memory: Memory{Encoded: true}}, func(inf *Informer[*corev1.ConfigMap]) {
			reg = add(t, inf, HandlerFunc[*corev1.ConfigMap](func(e cache.Event[*corev1.ConfigMap]) {
				mu.Lock()
				if first == "" {
					first = e.Object().Name
				}
				mu.Unlock()
				rec.OnEvent(e)
			}), HandlerOptions{})
		})
		defer h.stop()

		var objs []*corev1.ConfigMap
		for i := range 10 {
			objs = append(objs, cm("k"+strconv.Itoa(i), "u"+strconv.Itoa(i), "1"))
		}
		h.src.relist("1", objs...)
		synctest.Wait() // the handler is stuck in its first call
		// Change two keys still waiting in the snapshot (the keys come in
		// no particular order: the first may be any).
		mu.Lock()
		var waiting []int
		for i := range 10 {
			if "k"+strconv.Itoa(i) != first {
				waiting = append(waiting, i)
			}
		}
		mu.Unlock()
		mod, del := waiting[0], waiting[1]
		h.src.send(ev(watcher.Modified, cm("k"+strconv.Itoa(mod), "u"+strconv.Itoa(mod), "2")),
			ev(watcher.Deleted, cm("k"+strconv.Itoa(del), "u"+strconv.Itoa(del), "3")), ev(watcher.Added, cm("n", "n1", "4")))
		synctest.Wait()
		if closed(reg.Synced()) {
			t.Fatal("registration synced before its handler was given the snapshot")
		}
		close(rec.gate)
		synctest.Wait()
		want := []string{"add n@4 initial=false", "add k" + strconv.Itoa(mod) + "@2 initial=true"}
		for i := range 10 {
			if i != mod && i != del {
				want = append(want, "add k"+strconv.Itoa(i)+"@1 initial=true")
			}
		}
		slices.Sort(want)
		equal(t, rec.take(), want)
		if !closed(reg.Synced()) {
			t.Fatal("registration not synced after its handler was given the snapshot")
		}
		if storeView(h.inf) != rec.snapshot() {
			t.Errorf("handler view %s, cache %s", rec.snapshot(), storeView(h.inf))
		}

		// A handler added now gets the cache the same way.
		late := newRecorder()
		lreg := add(t, h.inf, late, HandlerOptions{})
		synctest.Wait()
		if !closed(lreg.Synced()) || late.snapshot() != storeView(h.inf) {
			t.Errorf("late handler synced %v with view %s, cache %s", closed(lreg.Synced()), late.snapshot(), storeView(h.inf))
		}
	})
}
