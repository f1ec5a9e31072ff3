package manager

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
}

// Status reports the manager's state. It may be called from any goroutine.
func (m *Manager) Status() Status {
	m.mu.Lock()
	started := m.started
	m.mu.Unlock()
	return Status{
		Started:        started,
		Synced:         m.synced.Load(),
		LeaderElection: m.opts.LeaderElection != nil,
		Electing:       m.electing.Load(),
		Leading:        m.leading.Load(),
		Stopping:       m.stopping.Load(),
	}
}

// Runnables returns what has been added: the caches, then the runnables
// that run on every replica, then those that need leadership, each in the
// order added. Tools that show a manager's parts (package debug) read it.
func (m *Manager) Runnables() []Runnable {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Runnable, 0, len(m.caches)+len(m.always)+len(m.leader))
	for _, c := range m.caches {
		out = append(out, c)
	}
	out = append(out, m.always...)
	return append(out, m.leader...)
}

// LeaderElection returns Options.LeaderElection: nil without leader
// election.
func (m *Manager) LeaderElection() elector { return m.opts.LeaderElection }
