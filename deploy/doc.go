// Package deploy holds the tests of deploy/'s kustomize bases and overlays
// and of its Helm chart (charts/notifier) on the real local control plane:
// that they render (with sigs.k8s.io/kustomize/api, as `kubectl apply -k`
// does, and with Helm's SDK, as `helm template` does) and apply (by
// server-side apply, and by Helm's install and upgrade actions), and that
// the commands run with exactly the rights they grant. It is a module of
// its own so that kustomize and Helm stay out of the library's
// dependencies; the manifests themselves are the directories beside this
// file.
package deploy
