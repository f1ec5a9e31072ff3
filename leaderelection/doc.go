// Package leaderelection elects one leader among the replicas of a program
// with a coordination.k8s.io/v1 Lease, and runs the leader's work only while
// it leads.
//
// # How it works
//
// Every candidate (an Elector with its own Identity) reads the Lease at
// least every RetryPeriod. A candidate takes the lease when nobody holds it,
// when it was released, or when it has not changed for the holder's
// LeaseDuration as measured on the candidate's own clock from when it last
// saw the lease change; it tries at that moment, not at its next periodic
// attempt. The leader renews every RetryPeriod: renewal attempts start
// RetryPeriod apart whether they succeed or fail, each bounded by the time
// left before RenewDeadline, on the one renew mechanism that shard group
// members use too (internal/lease.Renewal). Every write carries a
// resourceVersion precondition, so two candidates cannot both win one, and
// a candidate's write at expiry succeeds only if the lease is still as it
// last saw it.
//
// So after the leader's last renewal, a candidate sees it within one
// RetryPeriod (and one read), and takes over LeaseDuration after it saw it
// (plus one write): within LeaseDuration + RetryPeriod of the renewal, plus
// the latency of those two requests. It never takes over sooner than
// LeaseDuration after the renewal, since it cannot have seen it earlier.
//
// # Clocks
//
// A candidate never reads the timestamps written in the lease: they come
// from the holder's clock, which may be set far from its own. It uses them
// only through their effect, a new resourceVersion, and times expiry on its
// own clock from the answer to the read that showed the change (the latest
// moment the change can have happened). Clocks that are set apart therefore
// do not matter; clocks that run at different rates do. The leader stops by
// RenewDeadline after its last renewal started, a candidate waits
// LeaseDuration after it saw it, so the election tolerates a candidate's
// clock running up to LeaseDuration/RenewDeadline times as fast as the
// leader's (1.5 with the defaults), less the time the leader's work needs
// to stop. Synchronized clocks are not required, but clocks that drift by
// more than that are outside what the package guarantees.
//
// The decisions (take, renew, wait, give up) are a pure core, tested with
// explicit times; Run is the shell that performs the requests and waits.
//
// # Guarantees
//
//   - The leader's work (Run's lead) runs in a goroutine that Run starts and waits for; Run
//     returns only after it has returned. Its context is cancelled, with a
//     cause, when Run's context is cancelled or leadership is lost.
//   - The lease stays renewed until the leader's work has returned, and is
//     released (holder cleared) only then, so a leader's slow shutdown is
//     not overlapped by the next leader unless renewal itself fails. Unless
//     KeepLeaseOnCancel is set, release on cancel lets a waiting candidate
//     take over at its next attempt instead of after LeaseDuration.
//   - A leader that cannot renew stops leading RenewDeadline after the start
//     of its last successful renewal: its work's context is cancelled with
//     ErrLeadershipLost, and Run returns an error wrapping it.
//   - OnStoppedLeading is called only if this candidate led, after the work
//     returned and the lease was released.
//   - New starts nothing; every goroutine Run starts has exited when it
//     returns.
//
// # Leader election does not fence
//
// Holding the lease is a belief, not a lock on the world. A leader that is
// paused (a long GC, a frozen VM, a partition) can go on acting after its
// lease expired and another candidate took over, and nothing stops its
// writes from reaching the API server. The design bounds the overlap but
// cannot rule it out: a leader stops by RenewDeadline after its last renewal
// started, while others wait LeaseDuration after they saw it, so the work
// has LeaseDuration − RenewDeadline (5s by default), less clock-rate drift
// and pauses, to stop after its context is cancelled. Writes that must never
// come from two leaders need their own guard, such as resourceVersion
// preconditions on the objects written.
//
// # Your responsibilities
//
//  1. Give each candidate a distinct Identity (the default is unique).
//  2. Return from the leader's work promptly once its context is done.
//  3. Exit, or call Run again, when Run returns ErrLeadershipLost; do not
//     keep doing leader-only work.
//  4. Keep OnNewLeader fast: it runs on the renewal goroutine.
//  5. Grant get, create and update on leases in the lease's namespace.
package leaderelection
