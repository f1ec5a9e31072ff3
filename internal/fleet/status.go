package fleet

import "time"

// ClusterStatus is one member of a fleet as /readyz and the debug page
// report it.
type ClusterStatus struct {
	Name string
	// Origin is the Spec's: "home", "file <path>" or "Secret <ns>/<name>".
	Origin string
	// State is "joining", "joined", "failed" (retried after a back-off) or
	// "invalid" (its definition cannot be used).
	State string
	// Since is when the member entered State.
	Since time.Time
	// Err is the last error: why an attempt failed, why the definition
	// cannot be used, or an informer's last list/watch error while joined.
	Err error
	// Objects is the number of objects in the member's caches.
	Objects int
}
