package workqueue

import (
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestExponentialRateLimiter_DoublesPerKeyUpToMaxAndResetsOnForget(t *testing.T) {
	r := newExponentialRateLimiter[string](5*time.Millisecond, time.Second)
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if d := r.When("a"); d != w*time.Millisecond {
			t.Fatalf("retry %d of a: When = %v, want %v", i, d, w*time.Millisecond)
		}
	}
	if d := r.When("b"); d != 5*time.Millisecond {
		t.Fatalf("first retry of b: When = %v, want 5ms (keys back off separately)", d)
	}
	if n := r.NumRequeues("a"); n != len(want) {
		t.Fatalf("NumRequeues(a) = %d, want %d", n, len(want))
	}
	r.Forget("a")
	if n := r.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues(a) = %d after Forget, want 0", n)
	}
	if d := r.When("a"); d != 5*time.Millisecond {
		t.Fatalf("When(a) = %v after Forget, want 5ms", d)
	}
}

func TestExponentialRateLimiter_NeverOverflowsPastMax(t *testing.T) {
	r := newExponentialRateLimiter[int](time.Millisecond, 1000*time.Second)
	for i := range 200 {
		d := r.When(1)
		if d <= 0 || d > 1000*time.Second {
			t.Fatalf("retry %d: When = %v, want within (0, 1000s]", i, d)
		}
	}
	if d := backoff(time.Hour, time.Duration(1<<62), 100); d != time.Duration(1<<62) {
		t.Fatalf("backoff(1h, max, 100) = %v, want max", d)
	}
	if d := backoff(0, time.Second, 5); d != 0 {
		t.Fatalf("backoff with base 0 = %v, want 0", d)
	}
}

func TestBucketRateLimiter_AllowsBurstThenSpacesRetriesAtQPS(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := newBucketRateLimiter[string](10, 3, clk)
	for i := range 3 {
		if d := r.When("x"); d != 0 {
			t.Fatalf("retry %d within the burst: When = %v, want 0", i+1, d)
		}
	}
	// The bucket is empty: retries queue up 100 ms apart.
	for i, w := range []time.Duration{100, 200, 300} {
		if d := r.When("x"); d != w*time.Millisecond {
			t.Fatalf("retry %d past the burst: When = %v, want %v", i+4, d, w*time.Millisecond)
		}
	}
	// After a long quiet spell the bucket is full again, but no fuller.
	clk.Step(time.Hour)
	for i := range 3 {
		if d := r.When("x"); d != 0 {
			t.Fatalf("after an hour, retry %d: When = %v, want 0", i+1, d)
		}
	}
	if d := r.When("x"); d != 100*time.Millisecond {
		t.Fatalf("fourth retry after an hour: When = %v, want 100ms (burst capped at 3)", d)
	}
	if n := r.NumRequeues("x"); n != 0 {
		t.Fatalf("NumRequeues = %d, want 0 (the bucket tracks no keys)", n)
	}
}

func TestBucketRateLimiter_NonPositiveQPSMeansNoLimit(t *testing.T) {
	r := newBucketRateLimiter[string](0, 1, nil)
	for range 10 {
		if d := r.When("x"); d != 0 {
			t.Fatalf("When = %v with qps 0, want 0", d)
		}
	}
}

func TestMaxOfRateLimiter_TakesTheLongestDelayAndForgetsEverywhere(t *testing.T) {
	exp := newExponentialRateLimiter[string](time.Millisecond, time.Hour)
	flat := newExponentialRateLimiter[string](3*time.Millisecond, 3*time.Millisecond)
	r := newMaxOfRateLimiter[string](exp, flat)
	for i, w := range []time.Duration{3 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond} {
		if d := r.When("a"); d != w {
			t.Fatalf("retry %d: When = %v, want %v", i+1, d, w)
		}
	}
	if n := r.NumRequeues("a"); n != 4 {
		t.Fatalf("NumRequeues = %d, want 4", n)
	}
	r.Forget("a")
	if exp.NumRequeues("a") != 0 || flat.NumRequeues("a") != 0 {
		t.Fatal("Forget did not reach every combined limiter")
	}
}

func TestDefaultRateLimiter_IsExponentialFrom5msCappedByAnOverallBucket(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := defaultRateLimiter[int](clk)
	for i, w := range []time.Duration{5, 10, 20, 40} {
		if d := r.When(1); d != w*time.Millisecond {
			t.Fatalf("retry %d: When = %v, want %v", i+1, d, w*time.Millisecond)
		}
	}
	for range 1000 {
		r.When(1)
	}
	if d := r.When(1); d != 1000*time.Second {
		t.Fatalf("after many retries When = %v, want the 1000s cap", d)
	}
	// 100 distinct keys fit the burst; the 101st waits for the 10 qps bucket.
	// (Keys 2.. have had 0 retries: exponential says 5ms.)
	r2 := defaultRateLimiter[int](clk)
	for k := range 100 {
		if d := r2.When(k); d != 5*time.Millisecond {
			t.Fatalf("key %d: When = %v, want 5ms", k, d)
		}
	}
	if d := r2.When(100); d != 100*time.Millisecond {
		t.Fatalf("101st retry in a burst: When = %v, want 100ms from the 10 qps bucket", d)
	}
}

// sample-controller's numbers: 5 ms to 1000 s per key, 50 qps burst 300.
func TestNewControllerRateLimiter_TakesTheBackOffAndTheBucketsNumbers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := NewControllerRateLimiter[int](5*time.Millisecond, 1000*time.Second, 50, 300, clk)
	for i, w := range []time.Duration{5, 10, 20} {
		if d := r.When(-1); d != w*time.Millisecond {
			t.Fatalf("retry %d: When = %v, want %v", i+1, d, w*time.Millisecond)
		}
	}
	// The burst had 3 tokens taken: 297 more keys fit, the next waits
	// 1/50 s.
	for k := range 297 {
		if d := r.When(k); d != 5*time.Millisecond {
			t.Fatalf("key %d: When = %v, want 5ms", k, d)
		}
	}
	if d := r.When(1000); d != 20*time.Millisecond {
		t.Fatalf("301st retry in a burst: When = %v, want 20ms from the 50 qps bucket", d)
	}
	r.Forget(-1)
	if n := r.NumRequeues(-1); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", n)
	}
}

func TestQueue_AddRateLimitedBacksOffAndForgetResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{RateLimiter: newExponentialRateLimiter[string](time.Second, time.Minute)})
		for i, w := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			start := time.Now()
			q.AddRateLimited("a")
			a := <-getAsync(q)
			if waited := a.at.Sub(start); a.key != "a" || waited != w {
				t.Fatalf("retry %d: Get = %q after %v; want a after %v", i+1, a.key, waited, w)
			}
			q.Done("a")
		}
		if n := q.NumRequeues("a"); n != 3 {
			t.Fatalf("NumRequeues = %d, want 3", n)
		}
		q.Forget("a")
		if n := q.NumRequeues("a"); n != 0 {
			t.Fatalf("NumRequeues = %d after Forget, want 0", n)
		}
		q.ShutDown()
		q.AddRateLimited("a")
		if n := q.NumRequeues("a"); n != 0 {
			t.Fatalf("NumRequeues = %d after AddRateLimited on a shut-down queue, want 0", n)
		}
	})
}
