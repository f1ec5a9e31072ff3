package notifier

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Retry defaults (see Options).
const (
	DefaultRetryBase    = 500 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
	DefaultDrainTimeout = 10 * time.Second
)

// delivery is one sink's filter, bounded queue and worker. Events are
// delivered in the order they were queued, one at a time.
type delivery struct {
	name   string
	sender sender
	filter *filter
	// advanced applies kubewatch's advanced filters (advancedPass).
	advanced bool
	// incidents is the notifier's incident tracker if the sink sends
	// incidents (nil: one message per change, as kubewatch); updates:
	// the sink is sent every change of an incident, not only its open
	// and resolve (see incidentUpdates).
	incidents   *incidentTracker
	updates     bool
	maxAttempts int
	retryBase   time.Duration
	retryMax    time.Duration
	// wait sleeps d or until ctx is done (then it returns ctx's error);
	// tests replace it to run the retry policy without sleeping.
	wait func(ctx context.Context, d time.Duration) error
	log  *slog.Logger
	m    *notifierMetrics

	mu     sync.Mutex
	closed bool
	// queue is the bounded queue; over holds, per object, what it had
	// no room for (see overflow). Sends to queue happen under mu, so
	// len(queue) < cap(queue) under mu means a send cannot block.
	queue chan *Event
	over  overflow
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// offer queues ev if it passes the filter. It never blocks, and a full
// queue loses nothing: ev is set aside with its object's other waiting
// changes (merged, see coalesce) and queued as soon as the queue has room.
// Only a stopping sink refuses events (they are sent again after a
// restart: the checkpoint does not pass them).
func (d *delivery) offer(ev *Event) {
	if ev.resolve != nil {
		// A resolve goes to every incident sink; it sends it if it
		// sent anything of the incident.
		if d.incidents == nil {
			return
		}
	} else if !d.filter.match(ev) || (d.advanced && !advancedPass(ev)) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.m.failed.WithLabelValues(d.name, failShutdown).Inc()
		ev.hold()
		ev.finish(false)
		return
	}
	ev.hold()
	d.pumpLocked()
	if d.over.len() == 0 && len(d.queue) < cap(d.queue) {
		d.queue <- ev
		return
	}
	if d.over.len() == 0 {
		d.log.Warn("Sink queue full: setting notifications aside, to send each object's latest state when the queue has room",
			"sink", d.name, "queueSize", cap(d.queue), "kind", ev.Kind, "namespace", ev.Namespace, "name", ev.Name, "event", ev.Type)
	}
	d.m.overflowed.WithLabelValues(d.name).Inc()
	for _, c := range d.over.add(ev) {
		c.carried()
		d.m.merged.WithLabelValues(d.name).Inc()
	}
	d.m.overflowObjects.WithLabelValues(d.name).Set(float64(d.over.len()))
}

// pumpLocked moves set-aside events to the queue while it has room.
func (d *delivery) pumpLocked() {
	if d.over.len() == 0 {
		return
	}
	for d.over.len() > 0 && len(d.queue) < cap(d.queue) {
		ev, _ := d.over.pop()
		d.queue <- ev
	}
	d.m.overflowObjects.WithLabelValues(d.name).Set(float64(d.over.len()))
}

// next takes the next event to deliver, refilling the queue from what was
// set aside; ok is false when there is none.
func (d *delivery) next() (ev *Event, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pumpLocked()
	select {
	case ev = <-d.queue:
		d.pumpLocked()
		return ev, true
	default:
		return nil, false
	}
}

// run delivers queued events until ctx is done. Then it takes no new
// events and delivers those already queued for at most drain (counting the
// rest as failed with reason shutdown), and returns.
func (d *delivery) run(ctx context.Context, drain time.Duration) {
	// hard outlives ctx by drain: it bounds the retries of the event in
	// flight and of those still queued.
	hard, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var (
		timerMu sync.Mutex
		timer   *time.Timer
	)
	stopAfter := context.AfterFunc(ctx, func() {
		timerMu.Lock()
		timer = time.AfterFunc(drain, cancel)
		timerMu.Unlock()
	})
	defer func() {
		stopAfter()
		timerMu.Lock()
		if timer != nil {
			timer.Stop()
		}
		timerMu.Unlock()
	}()

	for {
		select {
		case ev := <-d.queue:
			d.mu.Lock()
			d.pumpLocked()
			d.mu.Unlock()
			d.deliver(hard, ev)
			continue
		case <-ctx.Done():
		}
		d.mu.Lock()
		d.closed = true
		if n := len(d.queue) + d.over.len(); n > 0 {
			d.log.Info("Draining sink queue", "sink", d.name, "queued", len(d.queue), "setAside", d.over.len(), "drainTimeout", drain)
		}
		d.mu.Unlock()
		for {
			ev, ok := d.next()
			if !ok {
				return
			}
			d.deliver(hard, ev)
		}
	}
}

// deliver sends ev, retrying network errors, 5xx and 429 with exponential
// backoff until it has tried maxAttempts times.
func (d *delivery) deliver(ctx context.Context, ev *Event) {
	log := d.log.With("sink", d.name, "kind", ev.Kind, "namespace", ev.Namespace, "name", ev.Name, "event", ev.Type)
	send := func(ctx context.Context) error { return d.sender.send(ctx, ev) }
	switch {
	case d.incidents != nil && ev.Incident != nil:
		view, ref, ok := d.incidentView(ctx, ev)
		if !ok {
			ev.finish(true)
			return
		}
		log = log.With("incident", view.Incident.ID, "state", view.Incident.State)
		send = func(ctx context.Context) error { return d.sendIncident(ctx, view, ref) }
	case ev.Incident != nil || ev.Explanation != nil:
		// Not an incident sink: kubewatch's message.
		cp := *ev
		cp.Incident, cp.Explanation, cp.tr, cp.pend = nil, nil, nil, nil
		send = func(ctx context.Context) error { return d.sender.send(ctx, &cp) }
	}
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			d.m.failed.WithLabelValues(d.name, failShutdown).Inc()
			log.Error("Dropping a notification: shutting down", "attempts", attempt-1)
			ev.finish(false)
			return
		}
		err := send(ctx)
		if err == nil {
			d.m.sent.WithLabelValues(ev.Kind, string(ev.Type), d.name).Inc()
			log.Debug("Notification sent", "attempts", attempt)
			ev.finish(true)
			return
		}
		switch {
		case ctx.Err() != nil:
			continue // counted as shutdown above
		case !isRetryable(err):
			d.m.failed.WithLabelValues(d.name, failRejected).Inc()
			log.Error("Notification rejected; not retrying", "attempts", attempt, "err", err)
			ev.finish(true)
			return
		case attempt >= d.maxAttempts:
			d.m.failed.WithLabelValues(d.name, failAttempts).Inc()
			log.Error("Giving up on a notification", "attempts", attempt, "err", err)
			ev.finish(true)
			return
		}
		delay := d.delay(attempt, err)
		log.Warn("Notification failed; will retry", "attempt", attempt, "retryIn", delay, "err", err)
		_ = d.wait(ctx, delay) // an interrupted wait ends at the ctx check
	}
}

// delay is the wait after the given failed attempt: retryBase doubled per
// attempt, at least the server's Retry-After, at most retryMax.
func (d *delivery) delay(attempt int, err error) time.Duration {
	delay := d.retryBase
	for i := 1; i < attempt && delay < d.retryMax; i++ {
		delay *= 2
	}
	var se *sendError
	if errors.As(err, &se) && se.retryAfter > delay {
		delay = se.retryAfter
	}
	return min(delay, d.retryMax)
}
