// Package scaleout holds the end-to-end tests of the Foo controller run as
// several sharded replicas (kloop.Options.Sharding): separate processes
// sharing 600 Foos in 300 namespaces, killed with SIGKILL and joined by
// another, on a real control plane with sharded list and watch on and off.
// It has no code besides its tests; see docs/scaling.md. It checks where
// kloop's slot hashing places each Foo, so it reads kloop's internal
// packages, and lives here rather than beside the Foo sample, whose tests
// use only what users' tests can import.
package scaleout
