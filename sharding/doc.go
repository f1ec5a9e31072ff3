// Package sharding splits the objects of a controller between its replicas:
// each replica caches and reconciles about 1/N of them, shares move when
// replicas come and go, and no object is reconciled by two replicas at
// once. It is built on server-side sharded list and watch (KEP-5866,
// Kubernetes 1.36+, feature gate ShardedListAndWatch), and works without
// it, filtering on the client.
//
// # How
//
// The hash space of an object field (its namespace or its UID; see Key) is
// cut into a fixed number of slots (Options.Slots, 64 by default). Each
// replica is a Member of a group: it holds a coordination.k8s.io Lease of
// its own, labelled with the group, which lists the slots it holds. It is
// renewed by the same mechanism as a leader-election Lease
// (internal/lease.Renewal): renewals start RetryPeriod apart whether they
// succeed or fail, each bounded by the time left before RenewDeadline;
// a member also writes it at once when its slots change. The live
// members fix the owner of every slot deterministically (rendezvous
// hashing with bounded loads), so a member joining or leaving moves about
// 1/N of the slots.
//
// A member's informers (through the informer factory's Restrict: Shard or
// ShardWhen) send a shard selector for the slots it holds
// ("shardRange(object.metadata.namespace, '0x…', '0x…') || …") and keep
// only those slots' objects, so an API server with the feature sends each
// replica its share, and one without sends everything and the replica
// drops the rest. Its controllers (Gate) reconcile only
// keys of the slots it holds with filled caches.
//
// A fleet of clusters shares one member and its slots: ShardWhen and Gate
// name the cluster of an informer and of a key, and each cluster's hash
// slots are turned by an offset from its name, so that slot s holds a
// different part of each cluster and a replica about 1/N of every one.
//
// # Handover without overlap
//
// When slot s moves from A to B:
//
//  1. A stops handing out keys of s, waits for its reconciles of s in
//     flight (controller.Controller.Restrict), drops the objects of s from
//     its caches without telling handlers they were deleted
//     (the informer factory's Restrict), and then writes its Lease without s.
//  2. B claims s only while no other live Lease lists it: it writes s into
//     its Lease, reads every Lease of the group afresh, and starts s only if
//     still no other live Lease lists it (two members that claim one slot
//     at once cannot both miss the other: the later reader sees the earlier
//     writer, and backs off). A Lease that has not changed for its
//     duration, on the reader's clock, no longer counts: a member that was
//     killed is taken over after its Lease duration.
//  3. B's informers relist (again through the factory's Restrict) with the wider
//     selector; the objects of s reach its handlers as Added events with Replay set,
//     like an initial list, not as creations. Once every informer has
//     relisted, s is active: its keys are enqueued and reconciled.
//
// # Guarantees
//
//   - At any time, a slot's keys are reconciled by at most one replica
//     whose Lease is current, provided each replica's reconciles stop
//     within LeaseDuration − RenewDeadline of its last renewal when it can
//     no longer renew (as with leader election, this is not fencing: a
//     paused replica whose Lease expired may still act; guard writes that
//     must never overlap with resourceVersion preconditions).
//   - A member that cannot renew its Lease for RenewDeadline gives every
//     slot up (stops its keys, drops its objects) and rejoins once it can.
//   - On a stop (Start's context done) a member gives its slots up and
//     deletes its Lease, so the others take over at once.
//   - Members with another slot count or key never share slots: while one
//     is live, the others claim nothing (a rolling change of Slots or Key
//     waits for the old replicas to be gone).
//
// # Not guaranteed
//
//   - Balance: ByNamespace puts every object of a namespace in one slot,
//     so few namespaces, or one much larger than the others, give uneven
//     shares. ByUID spreads evenly but separates objects from their owners.
//   - Objects related across namespaces: ByNamespace places an object by
//     its own namespace, so a notification about an object in one
//     namespace that maps to a key in another reaches only the replica
//     caching the first; the replica reconciling the key may never hear of
//     it. Keep such sources unsharded, or shard by a key they share.
//   - Under ByUID a key whose object is gone from the cache is not
//     reconciled (its slot cannot be known): clean up with owner
//     references or finalizers, which keep the object until it is done.
//   - Events of an object outside the shard may still arrive for a while
//     after a slot left (until the watch reconnects): they are dropped on
//     the client. A relist is needed to take a slot in; each costs a list
//     of this replica's share.
//
// # Your responsibilities
//
//  1. Give every replica of a group the same Group, Key and Slots, and a
//     distinct Identity (the default is unique).
//  2. Grant get, list, watch, create, update and delete on leases in the
//     Leases' namespace.
//  3. Key the controllers by cache.Key, and give each a primary kind whose
//     objects carry the shard key (see Gate).
package sharding
