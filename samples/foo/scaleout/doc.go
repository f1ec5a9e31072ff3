// Package scaleout holds the end-to-end tests of the Foo controller run as
// several sharded replicas (kloop.Options.Sharding): separate processes
// sharing 600 Foos in 300 namespaces, killed with SIGKILL and joined by
// another, on a real control plane with sharded list and watch on and off.
// It has no code besides its tests; see docs/scaling.md.
package scaleout
