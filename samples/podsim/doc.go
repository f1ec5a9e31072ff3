// Package podsim is a simulated kubelet for a control plane without nodes,
// such as the one testenv and `kloop dev` start (no scheduler, no kubelet):
// it lets Deployments, ReplicaSets and the controllers built on them reach
// "available" without running a single container.
//
// Run registers one Node (Ready, with room for 110 pods), renews its
// heartbeat Lease in kube-node-lease every 10 seconds as a kubelet does, and,
// through an informer and a controller:
//
//   - binds every Pending pod that has no node and asks for the default
//     scheduler to that Node, through the pods/binding subresource, as a
//     scheduler would;
//   - marks every pod bound to that Node Running (unless it has Succeeded
//     or Failed, which only others set), with a pod IP from
//     10.244.0.0/16, running and ready container statuses, and the
//     PodScheduled, PodReadyToStartContainers, Initialized,
//     ContainersReady and Ready conditions True;
//   - finishes every pod of a batch/v1 Job (an owner reference of kind
//     Job) once it ran: its containers terminate with exit code 0 and the
//     pod Succeeded, so the Job controller completes the Job. The
//     annotation podsim.kloop.dev/exit-code (ExitCodeAnnotation) on the
//     Job's pod template sets another exit code: "1" makes the pods
//     Failed, so a Job with backoffLimit 0 fails. Other pods run until
//     deleted;
//   - deletes, with a grace period of zero, every pod of that Node that is
//     being deleted gracefully, as a kubelet does once its containers have
//     stopped, so scale-downs and pod deletions complete.
//
// Not simulated: images, containers, probes, restarts (a Job's pod that
// exits non-zero is Failed whatever its restartPolicy), resources and
// eviction, init containers' work (they are reported completed), periodic
// node status reports (the Node's conditions are written once at start; the
// Lease is the heartbeat a node-lifecycle controller watches) and pod IP
// reuse after a restart of podsim.
package podsim
