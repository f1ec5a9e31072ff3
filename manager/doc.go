// Package manager runs a program's informer factories, controllers and
// other runnables under one context, with optional leader election, HTTP
// servers for /metrics and for /healthz and /readyz (each off unless given
// an address, one server when both share it), and a signal helper for a
// graceful stop. It is kloop's kube-controller-manager in miniature.
//
// # Guarantees
//
//   - Start returns only once every runnable it started has returned (unless
//     ShutdownTimeout runs out first, which Start reports as
//     ErrShutdownTimeout).
//   - Caches (runnables with WaitForSync, such as *informer.Factory) run on
//     every replica; /readyz reports ready only once all have synced. With
//     leader election, a standby replica is ready too: it is campaigning
//     with warm caches.
//   - Runnables that need leadership (controllers, unless
//     Options.SkipLeaderElection) run only while this replica leads. When
//     leadership ends they are stopped, and the lease is released only after
//     all of them have returned, so their in-flight work never overlaps the
//     next leader's on a clean hand-over.
//   - Stop order: leader-needing and other runnables, then caches, then the
//     HTTP server.
//   - A lost lease stops the manager with ErrLeadershipLost: controllers run
//     once, so the process should exit and start again as a candidate.
//
// # Not guaranteed
//
//   - Fencing. If this replica cannot reach the API server, another may
//     take the lease when it expires while this one's reconciles are still
//     draining (see the leaderelection package). Keep controllers'
//     DrainTimeout below the lease's renew deadline to narrow that window.
//
// # Signals and logs
//
// SignalContext cancels a context on the first SIGINT or SIGTERM and exits
// with status 1 on the second. (klog.SetSlogLogger sends client-go's klog
// output to a slog.Logger; cli's logging flags do it for a command.)
package manager
