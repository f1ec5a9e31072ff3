package leaderelection

import "time"

// Status is an elector's view of its lease at one moment.
type Status struct {
	// Lease is "namespace/name".
	Lease string
	// Identity is this candidate's; Leader the holder as last observed
	// ("" when released or not yet seen).
	Identity, Leader string
	// Leading: this candidate leads: it acquired the lease, the leader's
	// work has not been told to stop, and RenewDeadline has not passed
	// since the last renewal.
	Leading bool
	// LeadingSince is when this candidate last became the leader; zero if
	// it never did.
	LeadingSince time.Time
	// RenewedAt is when this candidate last acquired or renewed the lease
	// while leading; Renewals counts its renewals since New.
	RenewedAt time.Time
	Renewals  uint64
	// Stalled is an error when this candidate believes it leads but has
	// not renewed the lease for longer than LeaseDuration, which means its
	// renew loop is stuck; a liveness probe fails on it (the manager's
	// /healthz does). It is nil otherwise, including when not leading.
	Stalled error
}

// Status reports the elector's state. It may be called from any goroutine.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Status{
		Lease:        e.cfg.Namespace + "/" + e.cfg.Name,
		Identity:     e.cfg.Identity,
		Leader:       e.leader,
		Leading:      e.leading,
		LeadingSince: e.since,
		RenewedAt:    e.renewedAt,
		Renewals:     e.renewals,
		Stalled:      e.stalledLocked(),
	}
}
