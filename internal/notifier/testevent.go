package notifier

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// SinkResult is what SendTestEvent got from one sink.
type SinkResult struct {
	Name, Type string
	// Err is nil when the sink took the event.
	Err error
}

// testEvent is kubewatch's `config test` event: kind testKind, namespace
// testNamespace, name testResource, reason Tested, status Normal.
func testEvent(now time.Time, cluster string) *Event {
	return &Event{Type: Create, Test: true, Kind: "testKind", APIVersion: "v1", Namespace: "testNamespace", Name: "testResource",
		Cluster: cluster, Time: now}
}

// SendTestEvent sends testEvent once (no retries) to every sink of cfg,
// with the sink's own payload, template and transport, and returns each
// sink's outcome in config order. It watches nothing and needs no API
// server. The error is for a config that does not validate.
func SendTestEvent(ctx context.Context, cfg Config, opts Options) ([]SinkResult, error) {
	cfg.Sinks = append([]SinkConfig(nil), cfg.Sinks...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	ev := testEvent(now, cfg.ClusterName)
	out := make([]SinkResult, len(cfg.Sinks))
	var wg sync.WaitGroup
	outMu := &sync.Mutex{}
	for i, sc := range cfg.Sinks {
		out[i] = SinkResult{Name: sc.Name, Type: sc.Type}
		text, err := newTextFunc(sc.Name, sc.Template)
		if err != nil {
			out[i].Err = err
			continue
		}
		s, closer, err := newSender(sc, text, opts.Out, outMu, now)
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Go(func() {
			if closer != nil {
				defer closer()
			}
			ctx, cancel := context.WithTimeout(ctx, requestTimeout+5*time.Second)
			defer cancel()
			if err := s.send(ctx, ev); err != nil {
				out[i].Err = fmt.Errorf("%w", err)
			}
		})
	}
	wg.Wait()
	return out, nil
}
