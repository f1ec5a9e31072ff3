// Package fleet runs a kloop App's controllers over many clusters, a stage
// on top of kloop.App as sharding is on top of the informers: New gives an
// App a fleet, Objects declares a kind in every cluster, NewController a
// controller over them all, keyed by Key (the cluster's name and the
// object's key).
//
//	app, _ := kloop.New(cfg, kloop.Options{Scheme: scheme})
//	f, _ := fleet.New(app, fleet.Options{Home: "home", KubeconfigDir: "/etc/clusters"})
//	foos := fleet.Objects[*v1alpha1.Foo](f)
//	deps := fleet.Objects[*appsv1.Deployment](f)
//	fleet.NewController(f, "foo", func(ctx context.Context, k fleet.Key) (controller.Result, error) {
//		foo, err := foos.In(k.Cluster).Get(ctx, k.Namespace, k.Name) // a plain *kloop.Handle
//		...
//	}).For(foos).Owns(deps).Complete()
//	_ = app.Run(ctx)
//
// What it guarantees:
//   - Each cluster gets a kloop.App of its own (informers, client, event
//     recorder, metrics registry), made when the cluster joins and run by
//     the fleet App's Run; when the cluster leaves, that App stops and its
//     informers, goroutines and connections are gone before the cluster
//     is reported left.
//   - A cluster's keys flow only while it is joined: from the moment its
//     caches have synced until it starts to leave. A key of a cluster that
//     is not joined is dropped without a reconcile, and In returns a
//     handle whose reads and writes fail saying so (kloop.Unavailable).
//   - One cluster cannot hold the others: it is joined, probed and synced
//     on its own goroutine; its client's requests time out (30s); a
//     cluster that cannot be joined (unreachable, credentials refused, a
//     kind it does not serve, a kubeconfig that cannot be used) is
//     reported (log, the kloop_fleet_* metrics, /readyz?verbose, the
//     debug page, and an Event on its Secret) and tried again with
//     back-off while the others go on.
//   - A reconcile's causes name their source and object as in one
//     cluster: the per-cluster sources are controller.Map of kloop's own.
//   - With the App's Sharding (by namespace) each replica holds and
//     reconciles its share of every cluster, placed by (cluster,
//     namespace); no key is reconciled by two replicas at once.
//
// What it does not do: it does not copy objects between clusters, and a
// fleet controller's For reconciles failures without a Warning event on
// the object (write one through Cluster(k.Cluster).Recorder()).
package fleet
