package workqueue

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// RateLimiter decides how long a key waits before it is retried.
// Implementations must be safe for concurrent use.
type RateLimiter[K comparable] interface {
	// When returns the delay before k's next retry and counts the retry.
	When(k K) time.Duration
	// Forget stops tracking k: its next When starts afresh.
	Forget(k K)
	// NumRequeues reports how many retries of k were counted since its
	// last Forget.
	NumRequeues(k K) int
}

// defaultRateLimiter is the limiter a Queue uses when Options.RateLimiter is
// nil, the one Kubernetes controllers have used for years: the larger of a
// per-key exponential back-off from 5 ms doubling up to 1000 s, and an
// overall token bucket of 10 retries per second with a burst of 100. A nil
// clock means the real clock.
func defaultRateLimiter[K comparable](clk clock.PassiveClock) RateLimiter[K] {
	return NewControllerRateLimiter[K](5*time.Millisecond, 1000*time.Second, 10, 100, clk)
}

// NewControllerRateLimiter is the default limiter's shape with other
// numbers: the larger of a per-key exponential back-off from base doubling
// up to max, and an overall token bucket of qps retries per second with a
// burst of burst. sample-controller, for example, uses 5 ms, 1000 s, 50
// and 300. A nil clock means the real clock.
func NewControllerRateLimiter[K comparable](base, max time.Duration, qps float64, burst int, clk clock.PassiveClock) RateLimiter[K] {
	return newMaxOfRateLimiter(newExponentialRateLimiter[K](base, max), newBucketRateLimiter[K](qps, burst, clk))
}

// exponentialRateLimiter delays a key base·2^n, where n is the number of
// retries counted for it, capped at max.
type exponentialRateLimiter[K comparable] struct {
	base, max time.Duration

	mu       sync.Mutex
	failures map[K]int
	// counted is len(failures), read without mu: a Forget of a key that
	// never failed, with no key failing, as after every successful
	// reconcile, takes no lock.
	counted atomic.Int64
}

// newExponentialRateLimiter returns a per-key exponential back-off from base
// up to max.
func newExponentialRateLimiter[K comparable](base, max time.Duration) RateLimiter[K] {
	return &exponentialRateLimiter[K]{base: base, max: max, failures: make(map[K]int)}
}

// When returns base·2^n for the n-th retry of k (n from 0), at most max.
func (r *exponentialRateLimiter[K]) When(k K) time.Duration {
	r.mu.Lock()
	n := r.failures[k]
	r.failures[k] = n + 1
	r.counted.Store(int64(len(r.failures)))
	r.mu.Unlock()
	return backoff(r.base, r.max, n)
}

// backoff is base·2^n capped at max, without overflowing.
func backoff(base, max time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	if n >= 63 || base > max>>n {
		return max
	}
	return base << n
}

// Forget resets k's back-off.
func (r *exponentialRateLimiter[K]) Forget(k K) {
	if r.counted.Load() == 0 {
		return
	}
	r.mu.Lock()
	delete(r.failures, k)
	r.counted.Store(int64(len(r.failures)))
	r.mu.Unlock()
}

// NumRequeues reports the retries counted for k.
func (r *exponentialRateLimiter[K]) NumRequeues(k K) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures[k]
}

// bucketRateLimiter limits retries of all keys together with a token bucket:
// qps tokens a second, at most burst saved up. A retry takes a token, waiting
// for it when the bucket is empty; waits queue up, so n retries at once on an
// empty bucket are spread n/qps seconds apart.
type bucketRateLimiter[K comparable] struct {
	qps   float64
	burst float64
	clock clock.PassiveClock

	mu     sync.Mutex
	tokens float64 // negative when retries are queued for future tokens
	last   time.Time
}

// newBucketRateLimiter returns an overall token bucket of qps per second and
// the given burst (at least 1): n retries at once on an empty bucket are
// spread n/qps seconds apart; keys are not tracked. qps <= 0 means no
// limit. A nil clock means the real clock.
func newBucketRateLimiter[K comparable](qps float64, burst int, clk clock.PassiveClock) RateLimiter[K] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	b := float64(max(burst, 1))
	return &bucketRateLimiter[K]{qps: qps, burst: b, clock: clk, tokens: b, last: clk.Now()}
}

// When takes a token and returns how long until it is available.
func (r *bucketRateLimiter[K]) When(K) time.Duration {
	if r.qps <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if elapsed := now.Sub(r.last); elapsed > 0 {
		r.tokens = min(r.burst, r.tokens+elapsed.Seconds()*r.qps)
		r.last = now
	}
	r.tokens--
	if r.tokens >= 0 {
		return 0
	}
	return time.Duration(-r.tokens / r.qps * float64(time.Second))
}

// Forget does nothing: the bucket does not track keys.
func (r *bucketRateLimiter[K]) Forget(K) {}

// NumRequeues is always 0: the bucket does not track keys.
func (r *bucketRateLimiter[K]) NumRequeues(K) int { return 0 }

// maxOfRateLimiter combines limiters: the delay is the longest any of them
// gives, NumRequeues the highest, and Forget reaches all of them.
type maxOfRateLimiter[K comparable] struct {
	limiters []RateLimiter[K]
}

// newMaxOfRateLimiter combines limiters: the delay is the longest any of
// them gives, NumRequeues the highest, and Forget reaches all of them.
// Every When asks all of them, so each counts every retry.
func newMaxOfRateLimiter[K comparable](limiters ...RateLimiter[K]) RateLimiter[K] {
	return &maxOfRateLimiter[K]{limiters: limiters}
}

// When returns the longest delay of the combined limiters.
func (r *maxOfRateLimiter[K]) When(k K) time.Duration {
	var d time.Duration
	for _, l := range r.limiters {
		d = max(d, l.When(k))
	}
	return d
}

// Forget forgets k in every combined limiter.
func (r *maxOfRateLimiter[K]) Forget(k K) {
	for _, l := range r.limiters {
		l.Forget(k)
	}
}

// NumRequeues returns the highest count of the combined limiters.
func (r *maxOfRateLimiter[K]) NumRequeues(k K) int {
	n := 0
	for _, l := range r.limiters {
		n = max(n, l.NumRequeues(k))
	}
	return n
}
