package workqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// This file checks the queue against a naive reference model: a map of keys
// to states, scanned linearly, that spells out the package documentation's
// contract. A program of random operations (Add, AddWithPriority, AddAfter,
// AddRateLimited, Get, Done, Forget, clock steps, Status, ShutDown,
// ShutDownWithDrain) runs on both, one operation at a time on a fake clock,
// and every answer of the queue must equal the model's. Get is called only
// when the model says it will not block.

const (
	modelKeys  = 8
	modelAging = 10 * time.Millisecond
	modelBase  = time.Millisecond // rate limiter back-off
	modelMax   = 100 * time.Millisecond
)

type mState int

const (
	mIdle mState = iota
	mReady
	mWaiting
	mInFlight
	mInFlightDirty
	mInFlightWaiting
)

func (s mState) String() string {
	return [...]string{"idle", "ready", "waiting", "in-flight", "in-flight+dirty", "in-flight+waiting"}[s]
}

type mKey struct {
	state   mState
	prio    int64 // highest priority asked since the last hand-out
	order   int64 // ready: readyTime − prio × aging
	seq     uint64
	readyAt int64 // waiting
	dseq    uint64
}

type model struct {
	keys [modelKeys]mKey
	now  int64
	seq  uint64
	dseq uint64
	shut bool
	// stamped turns true the first time a key with a non-zero priority
	// becomes ready or is raised. Before that the queue keeps no ready
	// times, and at that moment every ready key counts as ready from then.
	stamped  bool
	failures map[int]int
	// owed holds keys that must still be handed out: added (ready or added
	// while in flight) and not handed out since. Nothing in owed may be lost.
	owed map[int]bool
}

func newModel() *model {
	m := &model{failures: map[int]int{}, owed: map[int]bool{}}
	for i := range m.keys {
		m.keys[i].prio = math.MinInt64
	}
	return m
}

func (m *model) aged(p int64) int64 { return m.now - p*int64(modelAging) }

func (m *model) stampAll() {
	if m.stamped {
		return
	}
	m.stamped = true
	for k := range m.keys {
		if e := &m.keys[k]; e.state == mReady {
			e.order = m.now // all of priority 0 until now
		}
	}
}

func (m *model) raise(k int, p int64) {
	m.stampAll()
	e := &m.keys[k]
	e.prio = p
	e.order = min(e.order, m.aged(p))
}

func (m *model) makeReady(k int) {
	e := &m.keys[k]
	if e.prio != 0 {
		m.stampAll()
	}
	m.seq++
	e.state, e.seq, e.order = mReady, m.seq, m.aged(e.prio)
	m.owed[k] = true
}

func (m *model) add(k int, p int64) {
	if m.shut {
		return
	}
	e := &m.keys[k]
	switch e.state {
	case mIdle:
		e.prio = p
		m.makeReady(k)
	case mReady:
		if p > e.prio {
			m.raise(k, p)
		}
	case mInFlight, mInFlightWaiting:
		e.prio = max(e.prio, p)
		e.state = mInFlightDirty
		m.owed[k] = true
	case mInFlightDirty:
		e.prio = max(e.prio, p)
	case mWaiting:
		e.prio = max(e.prio, p)
		m.makeReady(k)
	}
}

func (m *model) addAfter(k int, d time.Duration, p int64) {
	if d <= 0 {
		m.add(k, p)
		return
	}
	if m.shut {
		return
	}
	e := &m.keys[k]
	at := m.now + int64(d)
	switch e.state {
	case mIdle:
		m.dseq++
		e.state, e.prio, e.readyAt, e.dseq = mWaiting, p, at, m.dseq
	case mReady:
		if p > e.prio {
			m.raise(k, p)
		}
	case mInFlightDirty:
		e.prio = max(e.prio, p)
	case mWaiting, mInFlightWaiting:
		e.prio = max(e.prio, p)
		e.readyAt = min(e.readyAt, at)
	case mInFlight:
		m.dseq++
		e.state, e.prio, e.readyAt, e.dseq = mInFlightWaiting, max(e.prio, p), at, m.dseq
	}
}

func (m *model) addRateLimited(k int) {
	if m.shut {
		return
	}
	d := backoffModel(m.failures[k])
	m.failures[k]++
	m.addAfter(k, d, 0)
}

func backoffModel(n int) time.Duration {
	d := modelBase
	for range n {
		d *= 2
		if d >= modelMax {
			return modelMax
		}
	}
	return d
}

// step advances time and promotes due keys in (readyAt, dseq) order.
func (m *model) step(d time.Duration) {
	m.now += int64(d)
	for {
		best := -1
		for k := range m.keys {
			e := &m.keys[k]
			if (e.state == mWaiting || e.state == mInFlightWaiting) && e.readyAt <= m.now {
				if best < 0 || e.readyAt < m.keys[best].readyAt ||
					e.readyAt == m.keys[best].readyAt && e.dseq < m.keys[best].dseq {
					best = k
				}
			}
		}
		if best < 0 {
			return
		}
		if e := &m.keys[best]; e.state == mWaiting {
			m.makeReady(best)
		} else {
			e.state = mInFlightDirty
			m.owed[best] = true
		}
	}
}

// next is the key Get must hand out, or -1.
func (m *model) next() int {
	best := -1
	for k := range m.keys {
		e := &m.keys[k]
		if e.state != mReady {
			continue
		}
		if best < 0 || e.order < m.keys[best].order ||
			e.order == m.keys[best].order && e.seq < m.keys[best].seq {
			best = k
		}
	}
	return best
}

func (m *model) handOut(k int) {
	e := &m.keys[k]
	e.state, e.prio = mInFlight, math.MinInt64
	delete(m.owed, k)
}

func (m *model) done(k int) {
	e := &m.keys[k]
	switch e.state {
	case mInFlight:
		e.state = mIdle
	case mInFlightDirty:
		m.makeReady(k)
	case mInFlightWaiting:
		e.state = mWaiting
	}
}

func (m *model) shutDown() {
	m.shut = true
	for k := range m.keys {
		switch e := &m.keys[k]; e.state {
		case mWaiting:
			e.state = mIdle
		case mInFlightWaiting:
			e.state = mInFlight
		}
	}
}

func (m *model) count(states ...mState) int {
	n := 0
	for k := range m.keys {
		if slices.Contains(states, m.keys[k].state) {
			n++
		}
	}
	return n
}

// reader turns fuzz bytes into choices; past the end it reads zeros.
type reader struct {
	b []byte
	i int
}

func (r *reader) next(n int) int {
	if r.i >= len(r.b) {
		return 0
	}
	v := int(r.b[r.i]) % n
	r.i++
	return v
}

var (
	modelPrios  = []int64{-100, -1, 0, 0, 0, 1, 5}
	modelDelays = []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}
	modelSteps  = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}
)

// runModel executes the program in b on a queue and the model and reports
// the first divergence.
func runModel(t *testing.T, b []byte) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := New(Options[int]{
		Clock:       clk,
		Aging:       modelAging,
		RateLimiter: newExponentialRateLimiter[int](modelBase, modelMax),
	})
	m := newModel()
	r := &reader{b: b}
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		last := trace[max(0, len(trace)-25):]
		t.Fatalf("after %d ops: %s\nstates: %v\nlast ops:\n  %s", len(trace), fmt.Sprintf(format, args...),
			m.keys, strings.Join(last, "\n  "))
	}
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	get := func() {
		want := m.next()
		if want < 0 {
			if m.shut && m.count(mInFlightDirty) == 0 {
				gctx, cancel := context.WithTimeout(ctx, deadline)
				defer cancel()
				if k, err := q.Get(gctx); !errors.Is(err, ErrShutDown) {
					fail("Get = %d, %v on a drained shut-down queue; want ErrShutDown", k, err)
				}
			}
			return // Get would block
		}
		gctx, cancel := context.WithTimeout(ctx, deadline)
		k, err := q.Get(gctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			fail("Get blocked for %v; the model has %d ready: the queue lost it", deadline, want)
		}
		if err != nil || k != want {
			fail("Get = %d, %v; want %d", k, err, want)
		}
		if m.keys[k].state != mReady {
			fail("Get handed out %d in state %v", k, m.keys[k].state)
		}
		m.handOut(k)
	}

	for r.i < len(r.b) {
		k := r.next(modelKeys)
		switch op := r.next(20); {
		case op < 4:
			trace = append(trace, fmt.Sprintf("Add(%d)", k))
			q.Add(k)
			m.add(k, 0)
		case op < 7:
			p := modelPrios[r.next(len(modelPrios))]
			trace = append(trace, fmt.Sprintf("AddWithPriority(%d, %d)", k, p))
			q.AddWithPriority(k, int(p))
			m.add(k, p)
		case op < 9:
			d := modelDelays[r.next(len(modelDelays))]
			p := modelPrios[r.next(len(modelPrios))]
			trace = append(trace, fmt.Sprintf("addAfter(%d, %v, %d)", k, d, p))
			q.addAfter(k, d, int(p))
			m.addAfter(k, d, p)
		case op < 10:
			trace = append(trace, fmt.Sprintf("AddRateLimited(%d)", k))
			q.AddRateLimited(k)
			m.addRateLimited(k)
		case op < 14:
			trace = append(trace, "Get")
			get()
		case op < 17:
			// Mostly Done for a key in flight; sometimes for any key, which
			// must be ignored unless it is in flight.
			if r.next(4) != 0 {
				for i := range modelKeys {
					if s := m.keys[(k+i)%modelKeys].state; s >= mInFlight {
						k = (k + i) % modelKeys
						break
					}
				}
			}
			trace = append(trace, fmt.Sprintf("Done(%d)", k))
			q.Done(k)
			m.done(k)
		case op < 18:
			d := modelSteps[r.next(len(modelSteps))]
			trace = append(trace, fmt.Sprintf("Step(%v)", d))
			clk.Step(d)
			m.step(d)
			if n, want := q.Status().Ready, m.count(mReady); n != want {
				fail("Status().Ready = %d after the step, want %d", n, want)
			}
		case op < 19:
			trace = append(trace, fmt.Sprintf("Forget(%d)", k))
			q.Forget(k)
			delete(m.failures, k)
			if n, want := q.NumRequeues(k), 0; n != want {
				fail("NumRequeues(%d) = %d after Forget", k, n)
			}
		default:
			switch r.next(8) {
			case 0:
				trace = append(trace, "ShutDown")
				q.ShutDown()
				m.shutDown()
			case 1:
				trace = append(trace, "ShutDownWithDrain(cancelled)")
				err := q.ShutDownWithDrain(cancelled)
				m.shutDown()
				drained := m.count(mReady, mInFlight, mInFlightDirty) == 0
				if drained && err != nil || !drained && !errors.Is(err, context.Canceled) {
					fail("ShutDownWithDrain = %v with drained = %v", err, drained)
				}
			default:
				trace = append(trace, fmt.Sprintf("Status, NumRequeues(%d)", k))
				if n, want := q.Status().Ready, m.count(mReady); n != want {
					fail("Status().Ready = %d, want %d", n, want)
				}
				if n, want := q.NumRequeues(k), m.failures[k]; n != want {
					fail("NumRequeues(%d) = %d, want %d", k, n, want)
				}
			}
		}
	}

	// Shut down and drain: every key still owed must come out, then Get must
	// report shutdown.
	trace = append(trace, "ShutDown (final)")
	q.ShutDown()
	m.shutDown()
	for round := 0; ; round++ {
		if round > 4*modelKeys {
			fail("final drain did not end")
		}
		for k := range modelKeys {
			if m.keys[k].state >= mInFlight {
				trace = append(trace, fmt.Sprintf("Done(%d) (final)", k))
				q.Done(k)
				m.done(k)
			}
		}
		if m.next() < 0 {
			break
		}
		for m.next() >= 0 {
			trace = append(trace, "Get (final)")
			get()
		}
	}
	if len(m.owed) != 0 {
		fail("keys %v were added and never handed out before shutdown completed", m.owed)
	}
	trace = append(trace, "Get (after drain)")
	gctx, cancelGet := context.WithTimeout(ctx, deadline)
	defer cancelGet()
	if k, err := q.Get(gctx); !errors.Is(err, ErrShutDown) {
		fail("Get = %d, %v after the final drain; want ErrShutDown", k, err)
	}
	if err := q.ShutDownWithDrain(cancelled); err != nil {
		fail("ShutDownWithDrain = %v after the final drain; want nil", err)
	}
}

// TestQueue_MatchesReferenceModel runs fixed-seed random programs, so the
// model check is part of every go test run.
func TestQueue_MatchesReferenceModel(t *testing.T) {
	programs := 300
	if testing.Short() {
		programs = 30
	}
	for seed := range programs {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x6b6c6f6f70))
		b := make([]byte, 200+rng.IntN(1500))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { runModel(t, b) })
	}
}

// FuzzQueue_MatchesReferenceModel explores programs beyond the fixed seeds:
// go test -fuzz FuzzQueue_MatchesReferenceModel ./workqueue/
func FuzzQueue_MatchesReferenceModel(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 12, 0, 14, 1, 3, 17, 2, 0, 12, 0, 0, 14})
	f.Add([]byte("add get done step shutdown drain priorities delays rate limits"))
	rng := rand.New(rand.NewPCG(7, 7))
	for range 8 {
		b := make([]byte, 300)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 8192 {
			b = b[:8192]
		}
		runModel(t, b)
	})
}
