// Package fleet holds the machinery under kloop's fleet of clusters
// (the public package fleet) that needs neither it nor kloop.App: where
// cluster definitions come from (kubeconfig bytes, a directory of
// kubeconfig files, kubeconfig Secrets), how a definition that cannot be
// used is explained, the back-off between attempts to join a cluster, and
// a dialer that closes a departed cluster's connections.
//
// Everything here is a pure function or a small value, so that the
// package's tests need no API server; the public package fleet runs the clusters.
package fleet
