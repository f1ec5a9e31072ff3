package kmetrics

import (
	"runtime"
	"slices"
	"sync"
)

// maxShards bounds the shards of one histogram, whatever GOMAXPROCS is: a
// native histogram takes a few kilobytes, and more shards than this buy
// little, since few goroutines observe one histogram at the same instant.
const maxShards = 8

// shards are the parts of one metric that cores update side by side:
// each update goes to the shard its core last used, and reads add them
// up. (Counters and gauges were tried so too and bought nothing
// measurable: an uncontended atomic add costs about what the pool does.) sync.Pool's per-P cache is what sends each core to a shard of its
// own without a lock. A shard the pool dropped (it empties at garbage
// collections) stays in all, which keeps every count; a core that finds
// none in the pool takes a new shard while there are fewer than
// min(GOMAXPROCS, maxShards), else the existing ones in turn.
type shards[S any] struct {
	make func() *S
	pool sync.Pool

	mu   sync.Mutex
	all  []*S
	next int
}

func newShards[S any](make func() *S) *shards[S] {
	return &shards[S]{make: make, all: []*S{make()}}
}

// do calls fn with the calling core's shard.
func (s *shards[S]) do(fn func(*S)) {
	sh, ok := s.pool.Get().(*S)
	if !ok {
		sh = s.take()
	}
	fn(sh)
	s.pool.Put(sh)
}

func (s *shards[S]) take() *S {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) < min(runtime.GOMAXPROCS(0), maxShards) && s.next >= len(s.all) {
		s.all = append(s.all, s.make())
	}
	sh := s.all[s.next%len(s.all)]
	s.next++
	return sh
}

// list returns every shard made so far.
func (s *shards[S]) list() []*S {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}
