package manager

import (
	"net"

	"github.com/kloop-dev/kloop/leaderelection"
)

// Status is the manager's own state at one moment.
type Status struct {
	// Started: Start has been called.
	Started bool
	// Synced: every cache has synced.
	Synced bool
	// LeaderElection: the manager runs with an elector; Electing: it is
	// campaigning (leading or standing by).
	LeaderElection, Electing bool
	// Leading: the leader-needing runnables run (always, once started,
	// without leader election).
	Leading bool
	// Stopping: the stop has begun.
	Stopping bool
	// MetricsAddr is the address /metrics is served on, HealthAddr that of
	// /healthz and /readyz, once Start has bound them (see AddrReady); nil
	// before, and for an endpoint that is off.
	MetricsAddr, HealthAddr net.Addr
	// Election is the elector's own status when it reports one (a
	// *leaderelection.Elector does); nil without leader election.
	Election *leaderelection.Status
	// Runnables is what has been added: the caches, then the runnables
	// that run on every replica, then those that need leadership, each in
	// the order added. Tools that show a manager's parts (package debug)
	// ask each for its own status.
	Runnables []Runnable
}

// Status reports the manager's state. It may be called from any goroutine.
func (m *Manager) Status() Status {
	m.mu.Lock()
	started := m.started
	runnables := make([]Runnable, 0, len(m.caches)+len(m.always)+len(m.leader))
	for _, c := range m.caches {
		runnables = append(runnables, c)
	}
	runnables = append(append(runnables, m.always...), m.leader...)
	m.mu.Unlock()
	st := Status{
		Started:        started,
		Synced:         m.synced.Load(),
		LeaderElection: m.opts.LeaderElection != nil,
		Electing:       m.electing.Load(),
		Leading:        m.leading.Load(),
		Stopping:       m.stopping.Load(),
		MetricsAddr:    m.boundAddr("metrics"),
		HealthAddr:     m.boundAddr("health"),
		Runnables:      runnables,
	}
	if el, ok := m.opts.LeaderElection.(interface{ Status() leaderelection.Status }); ok {
		es := el.Status()
		st.Election = &es
	}
	return st
}
