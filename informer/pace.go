package informer

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// snapshotPacer keeps the heap close to what is live while a snapshot
// arrives, because that is when a process reaches its peak: the cache
// grows from nothing to its full size, and the runtime lets the heap grow
// to twice what was live at the previous collection before it collects
// (GOGC=100). What it lets grow is decoding's garbage: for the default
// cache a little per object, for an encoded cache the whole decoded object,
// since only its encoding is kept. That headroom becomes resident memory
// and stays the process's high-water mark, which is what a container's
// memory limit sees.
//
// Every pacerEvery objects of a snapshot, the pacer compares the heap in
// use with the heap live at the latest collection, and collects when the
// difference exceeds a quarter of the live heap (at least pacerMinSlack):
// the heap then peaks near 1.25 times what is live instead of 2 times, for
// a few collections more during the first sync (their cost grows with the
// cache, geometrically, so together about four times one collection of the
// full cache). It does nothing when the collector is off (GOGC=off) and
// costs one runtime/metrics read per pacerEvery objects otherwise.
//
// The same goes for handing an encoded cache's snapshot to handlers, which
// decodes every object again, one at a time (listener.resolve). A pacer is
// safe for concurrent use.
type snapshotPacer struct {
	n       atomic.Uint64
	mu      sync.Mutex
	samples []metrics.Sample
}

const (
	pacerEvery    = 512
	pacerMinSlack = 2 << 20
)

func (p *snapshotPacer) step() {
	if p.n.Add(1)%pacerEvery != 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.samples == nil {
		p.samples = []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/gogc:percent"},
		}
	}
	metrics.Read(p.samples)
	live, inUse, gogc := p.samples[0].Value.Uint64(), p.samples[1].Value.Uint64(), p.samples[2].Value.Uint64()
	if gogc == 0 || live == 0 || gogc > 1000 {
		return // collector off, no collection yet, or a user who chose a large heap
	}
	if inUse > live+max(live/4, pacerMinSlack) {
		runtime.GC()
	}
}
