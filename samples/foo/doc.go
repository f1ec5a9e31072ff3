// Package foo is Kubernetes' sample-controller done the kloop way: for every
// Foo (samplecontroller.k8s.io/v1alpha1) it keeps a Deployment of nginx pods
// named spec.deploymentName, with spec.replicas replicas, and reports the
// Deployment's available pods in status.availableReplicas.
//
// Where sample-controller wires two generated clientsets, two informer
// factories, a rate-limited queue, event handlers and a worker loop by
// hand, here Setup declares the whole controller on a kloop.App: a typed
// handle per kind (reads from the shared cache with read-your-writes,
// writes to the API server) and one statement for the controller (For
// Foos, Owns Deployments); the App runs the informers, the controller and
// the event recorder.
//
// # What a sync does (sample-controller's order, and more)
//
//  1. Reads the Foo. A Foo that is gone needs nothing: its Deployment is
//     garbage-collected through its owner reference. So is that of a Foo
//     being deleted (deletionTimestamp set): it is left alone, so each
//     deletion propagation policy does what it says (Foreground and
//     Background delete the Deployment, Orphan leaves it, unowned).
//  2. A Foo without spec.deploymentName gets Ready=False with reason
//     DeploymentNameMissing and a Warning event, and a terminal error is
//     logged once per change of the Foo (not retried: retrying cannot help).
//  3. Creates the Deployment if it does not exist (see NewDeployment), by
//     server-side apply (foo-controller owns its fields by Apply from the
//     start), records Synced and ends the sync: a Deployment just created
//     needs no repair and has no status yet. The next sync, woken by the
//     first status kube-controller-manager writes to the Deployment (or
//     StatusAfterCreate later, if none comes), goes on from step 4 and
//     writes the Foo's first status. A name the API server refuses
//     (Invalid, such as Bad_Name!) gets Ready=False with reason
//     DeploymentInvalid and a Warning event, and is not retried until the
//     Foo changes.
//  4. If a Deployment of that name exists and is not controlled by this
//     Foo: a Warning event ErrResourceExists with sample-controller's
//     message, Ready=False with reason DeploymentNotOwned, and the same
//     error, retried with back-off. It never adopts or changes that
//     Deployment.
//  5. Repairs drift: when replicas (if spec.replicas is set), the selector
//     or template labels, or the nginx container's image differ from what
//     the Foo asks (kloop.Handle.Repair compares what it applies with the
//     live Deployment), it applies them with server-side apply (field manager
//     foo-controller, forced, guarded by the resourceVersion it checked);
//     fields others added (annotations, env vars, sidecars) stay.
//  6. After a rename of spec.deploymentName, deletes the Deployments this
//     Foo controls under other names once the new one is available
//     (kloop.Handle.DeleteControlledBy).
//  7. Writes the status: availableReplicas (always present, 0 included),
//     observedGeneration and the Ready condition (DeploymentAvailable or
//     DeploymentProgressing), unless it is already so. With the status
//     subresource when the CRD has one, else by an update (sample-
//     controller's crd.yaml); with sample-controller's CRDs, whose schemas
//     prune the new fields, only availableReplicas is kept, and the last
//     write is remembered (kloop.Handle.WriteStatus) so a pruned status is
//     not written over and over. The Ready condition carries the
//     generation it describes too (conditions.Set).
//  8. Records a Normal event Synced, "Foo synced successfully", if the
//     sync acted on a Deployment: created (step 3), repaired or deleted one (the
//     recorder folds repeats into one Event with a series). A sync that
//     only wrote the status records none: the status and the Ready
//     condition's lastTransitionTime already tell it.
//
// kloop's CRD (samples/foo/crd) has printer columns: deployment, desired,
// available, ready, age.
//
// # Differences from sample-controller
//
//   - No status write when the status is already right; no Deployment
//     write unless something drifted.
//   - Synced only after a Deployment was acted on. sample-controller
//     records it on every successful sync, which with aggregation is one
//     Event create or patch per sync (most of its API requests when many
//     Foos are in place); a sync here that finds everything in place
//     writes nothing at all, and one that only changes the status writes
//     just the status. A
//     sync that changed nothing is logged at debug level ("Foo synced",
//     changed=false).
//   - The first status is written by the sync after the one that created
//     the Deployment, not by the same sync: that one could only say "0
//     available" of a Deployment nobody has looked at yet. Alone, the next
//     sync follows within milliseconds and writes that; when many Foos
//     wait in the queue, the Deployment is often available by the time the
//     Foo's turn comes, and one status write says so (sample-controller
//     makes one status write per sync, three per Foo in such a burst).
//   - A sync right after the controller's own write reads that write back
//     (kloop.Handle), so a slow cache never makes it create a Deployment
//     twice or act on a Foo it has just changed.
//   - No periodic resync: a Foo is synced when it or its Deployment
//     changes.
package foo
