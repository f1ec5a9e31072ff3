package manager

import (
	"context"
	"errors"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/leaderelection"
)

// LeaseElector is the Elector over a coordination.k8s.io/v1 Lease, built on
// package leaderelection. Create it with NewLeaseElector.
type LeaseElector struct {
	el *leaderelection.Elector

	mu   sync.Mutex
	lead func(ctx context.Context)
}

var _ Elector = (*LeaseElector)(nil)

// NewLeaseElector returns an Elector for the lease cfg names, talking to
// the API server at restCfg. Leave cfg.OnStartedLeading unset: the manager
// supplies the leader's work. Every other field of cfg keeps its meaning
// and default (the leaderelection.Default… timings, released on stop).
func NewLeaseElector(restCfg *rest.Config, cfg leaderelection.Options) (*LeaseElector, error) {
	if cfg.OnStartedLeading != nil {
		return nil, errors.New("manager: LeaseElector: OnStartedLeading is the manager's; leave it unset")
	}
	l := &LeaseElector{}
	cfg.OnStartedLeading = func(ctx context.Context) error {
		l.mu.Lock()
		lead := l.lead
		l.mu.Unlock()
		lead(ctx)
		return nil
	}
	el, err := leaderelection.New(restCfg, cfg)
	if err != nil {
		return nil, err
	}
	l.el = el
	return l, nil
}

// Run implements Elector.
func (l *LeaseElector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	l.mu.Lock()
	l.lead = lead
	l.mu.Unlock()
	return l.el.Run(ctx)
}

// Identity is this candidate's identity in the lease.
func (l *LeaseElector) Identity() string { return l.el.Identity() }

// Leader is the holder of the lease as last observed.
func (l *LeaseElector) Leader() string { return l.el.Leader() }

// Check reports a leader whose renewals are stuck; the manager adds it to
// /healthz.
func (l *LeaseElector) Check() error { return l.el.Check() }
