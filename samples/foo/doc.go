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
// # What a sync does (in sample-controller's order)
//
//  1. Reads the Foo. A Foo that is gone needs nothing: its Deployment is
//     garbage-collected through its owner reference. So is that of a Foo
//     being deleted (deletionTimestamp set): it is left alone.
//  2. A Foo without spec.deploymentName is logged, once per change of the
//     Foo, as a terminal error (ErrNoDeploymentName): not retried, since
//     retrying cannot help until the Foo changes.
//  3. Creates the Deployment if it does not exist (see NewDeployment).
//  4. If a Deployment of that name exists and is not controlled by this
//     Foo, records a Warning event ErrResourceExists with the message
//     `Resource "<name>" already exists and is not managed by Foo` and
//     returns the same error, retried with back-off. It never adopts or
//     changes that Deployment.
//  5. If spec.replicas is set and differs from the Deployment's, updates
//     the Deployment's replicas (and nothing else of it).
//  6. Writes status.availableReplicas when it differs from the
//     Deployment's: through the status subresource when the Foo CRD has
//     one (sample-controller's crd-status-subresource.yaml, and the CRD in
//     samples/foo/crd), with an update of the whole Foo otherwise (its plain
//     crd.yaml). Discovery's answer is asked again when the CRD changes
//     under a running controller (a 404 from /status, or an update that
//     kept the old status).
//  7. Records a Normal event Synced, "Foo synced successfully" (the
//     recorder folds repeats into one Event with a count).
//
// # Differences from sample-controller
//
//   - A Foo being deleted is not synced, so a foreground deletion, which
//     deletes the Deployment before the Foo, does not get the Deployment
//     made again.
//   - No status write when the value is already right, and a replica
//     change keeps whatever else others changed in the Deployment (it is
//     an update of the cached copy, guarded by its resourceVersion, rather
//     than a replace by a freshly built object).
//   - A sync right after the controller's own write reads that write back
//     (kloop.Handle), so a slow cache never makes it create a
//     Deployment twice or act on a Foo it has just changed.
//   - No periodic resync: a Foo is synced when it or its Deployment
//     changes.
//
// # Not done (as in sample-controller)
//
//   - Only replica drift is corrected; changes to the Deployment's pod
//     template, labels or selector by others stay.
//   - Renaming spec.deploymentName creates a Deployment of the new name and
//     leaves the old one, still owned, until the Foo is deleted.
package foo
