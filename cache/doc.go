// Package cache holds kloop's object cache: a thread-safe, indexed Store with
// a single Writer and many concurrent readers, and the Lister interface
// readers use.
//
// An informer owns the Writer and applies the list/watch stream to it; a
// program's controllers read through Lister. The package does no I/O and
// starts no goroutines.
//
// # Guarantees
//
//   - One writer. New returns the store's only Writer, so no two sources can
//     interleave writes to one store.
//   - Atomic relists. Writer.Replace swaps a whole snapshot in under one lock
//     and returns the difference as Events (adds, updates, deletes, and a
//     delete plus an add where a key now holds a different UID). A reader never sees half of
//     a relist.
//   - Stable identity. An object that a relist did not change keeps the
//     pointer readers already hold.
//   - Progress you can wait for. ResourceVersion reports the last
//     resourceVersion applied (from events, bookmarks and relists), and
//     WaitFor blocks until the store has seen a given resourceVersion for a
//     key, which is how a caller reads its own write.
//   - Lean memory. One slot of a hash table per object, about 10–16 bytes
//     (a table per namespace, which is also the namespace index, keyed by
//     the name the object holds), one set entry per value of each
//     configured index, nothing else: no history, no per-object goroutines
//     or closures. With Options.Encoded an object is kept as its protobuf
//     encoding instead and decoded on every read, each read a new object.
//
// # Non-guarantees
//
//   - Freshness. A store is a cache and may lag the API server; an object
//     read from it may already be stale or deleted.
//   - Order. List and ByIndex return objects in no particular order.
//
// # Your responsibilities
//
//  1. Treat every object a store hands out as read-only. It is shared by all
//     readers. Use Copy and modify the copy. The mutation detector (which
//     test mains switch on through testenv.DetectMutations) fails tests that break this.
//  2. Call the Writer from one goroutine at a time, and do not modify an
//     object after giving it to the Writer.
//  3. Keep IndexFunc pure: the store calls it again on the same object when
//     removing it, and must get the same values back.
package cache
