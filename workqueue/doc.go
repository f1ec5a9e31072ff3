// Package workqueue is the queue between event handlers and a controller's
// workers: handlers add keys, workers take them with Get, process them, and
// report with Done.
//
//	q := workqueue.New(workqueue.Options[string]{Name: "foo"})
//	go func() { q.Add("default/a") }()
//	for {
//		key, err := q.Get(ctx)
//		if err != nil {
//			return // ErrShutDown or ctx.Err()
//		}
//		if err := reconcile(ctx, key); err != nil {
//			q.AddRateLimited(key)
//		} else {
//			q.Forget(key)
//		}
//		q.Done(key)
//	}
//
// # Guarantees
//
//   - De-duplication: a key added while it waits to be handed out is not
//     queued twice; it keeps one place in line and the higher priority.
//   - Exclusive processing: a key handed out by Get is not handed out again
//     until its Done, so two workers never hold one key. A key added while it
//     is being processed is handed out again after its Done.
//   - Order: Get hands out the ready key with the smallest
//     readyTime − priority × Aging, and among equal values the one that
//     became ready first. With one priority this is FIFO. readyTime is when
//     the key became ready: when it was added (the time the Add read, also
//     when the queue takes the key in later, see below), when its Done
//     re-queued it, or when the queue saw its delay pass. Re-adding a ready
//     key with a higher priority p at time t moves it to
//     min(current value, t − p × Aging), never back. (A queue that records
//     no metrics reads no clock for this until it first sees a priority
//     other than 0; the keys ready at that moment count as ready from then.)
//   - No starvation: from the above, a key of priority p that became ready at
//     t0 can only be overtaken by keys that become ready (or are raised)
//     before t0 + (P − p) × Aging, where P is the highest priority in use.
//     After that it is handed out once the keys already ahead of it are, at
//     the latest. With the default Aging of 100 ms, a priority −100 key is
//     overtaken by priority-0 traffic for at most 10 s, however steady that
//     traffic is. (controller-runtime's priority queue has no such bound.)
//   - Delays: AddAfter keeps delayed keys in one heap; a sooner AddAfter for
//     a delayed key moves it earlier, a later one changes nothing, and Add
//     makes it ready at once. At most one timer runs, held by a goroutine
//     blocked in Get. Keys whose delay has passed while no Get was blocked
//     become ready when a Get or Status next runs.
//   - Nothing lost at shutdown: after ShutDown, Get keeps handing out the
//     keys that were ready, and keys added while in flight once they are
//     Done, and only then returns ErrShutDown. ShutDownWithDrain waits for
//     that; a ShutDown while it waits releases it (ErrDrainStopped), the
//     "second signal" of client-go's queue.
//   - No goroutines: neither New nor any method starts one, so nothing needs
//     to be stopped; ShutDown only wakes the Gets that are blocked.
//   - Allocation-free steady state: keys are kept in recycled entries, so a
//     queue that has seen its keys before (and kept their entries, see
//     Memory below) adds, hands out and finishes them without allocating.
//     Adding a key that is already ready (at the same or a lower priority),
//     and Done for a key nobody added again while it was in flight (its
//     work duration observed all the same in a named queue), do not take
//     the queue's lock; nor, in a queue without a
//     Name, does adding a key the queue knows and holds idle, or raising
//     the priority of a ready key. Such an add leaves the key on a lock-free
//     list that the next call taking the lock (Get, Status, a locked add, Done
//     of a re-queued key, ShutDown) takes in first, in the order the adds
//     were made, with the ready time and priority they asked for; a blocked
//     Get is woken for it as for any add. So every Get sees the adds that
//     returned before it started. Only the tie-break among keys with equal
//     readyTime − priority × Aging follows when the queue took the key in,
//     not when its Add was called.
//
// # Contract for callers
//
//   - Call Done exactly once for every key Get returned, also when processing
//     failed (after AddRateLimited or AddAfter). A missing Done keeps the key
//     from ever being handed out again and keeps ShutDownWithDrain waiting;
//     an extra Done for a key not in flight is ignored.
//   - Get returns ctx.Err() when ctx is done before a key is handed out, and
//     ErrShutDown once the queue is shut down and has nothing more to hand
//     out. Either way the caller got no key and must not call Done.
//   - Forget resets the rate limiter's back-off for a key (call it when the
//     key succeeded or was given up); it does not remove the key.
//
// # Non-guarantees
//
//   - Status().Ready, and the depth metric, count ready keys only, not delayed or in
//     flight ones, and may be stale as soon as they are read.
//   - Delays are not exact: a delayed key becomes ready no earlier than its
//     time, and later if every worker is busy (it then ages from when the
//     queue saw it due).
//   - After ShutDown, delayed keys are dropped and every add is ignored.
//     ShutDownWithDrain waits only as long as workers keep calling Get and
//     Done; bound it with its context.
//   - Order across the queue is only as exact as the clock: keys that became
//     ready at the same instant with the same priority are FIFO by the order
//     the queue saw them. An add that raises a key that a concurrent add has
//     just left on the lock-free list (not yet taken in) raises it as of the
//     time of that first add, which may be a little earlier than its own.
//   - An add that races with ShutDown may be dropped, as if it came after.
//   - Memory: an entry for a key that stops being added is kept until about
//     8 × (number of keys held) further hand-outs (at least 65,536) have
//     passed, then recycled. Entries are recycled, not freed, while the
//     queue is busy. When it goes quiet (nothing ready, delayed or in
//     flight) holding more than 64 entries, and at least as many hand-outs
//     as it holds entries have passed since it last considered this, it
//     lets go of all of them, and of its key-map copy, unless adds took idle
//     entries up again at least half as often as there are entries in that
//     time (or about as many were made again as it last let go); entries it
//     keeps are let go after 100 ms of quiet with nothing handed out, a
//     blocked Get keeping time for it. A controller whose queue has drained
//     after a burst of keys that do not come back soon (an initial list, a
//     resync), or that has settled, holds no memory per key, and keys seen
//     again then take fresh entries.
//
// # Rate limiting
//
// AddRateLimited delays a key by what Options.RateLimiter says. The default
// (a nil RateLimiter) is the one client-go and controller-runtime give
// controllers: the larger of a per-key exponential back-off from 5 ms
// doubling to 1000 s, and an overall token bucket of 10 per second with a
// burst of 100. NewControllerRateLimiter is the same shape with other
// numbers (a QPS of 0 or less: no overall bucket); any other policy is a
// RateLimiter of your own.
//
// # Metrics
//
// A queue with a Name registers, on Options.Registerer (default
// metrics.Registry), the families controller-runtime uses, with the labels
// name and controller both set to the queue's name:
// workqueue_depth{priority}, workqueue_adds_total,
// workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
// workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds and workqueue_retries_total.
// The two in-progress gauges are computed when scraped, so no goroutine
// refreshes them. A queue without a Name records nothing and does no work for
// metrics.
//
// # Time
//
// The queue reads time from Options.Clock (k8s.io/utils/clock). Tests can
// pass a fake clock (k8s.io/utils/clock/testing) and step it, or run with the
// real clock inside a testing/synctest bubble.
package workqueue
