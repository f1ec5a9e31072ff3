// Package slots is the slot arithmetic of sharding: a Set of slots out of
// a fixed number, the hash that places a value in a slot (the API
// server's), the shard selector for a set of slots, and the deterministic
// assignment of slots to members. It is pure: no I/O, no goroutines.
package slots
