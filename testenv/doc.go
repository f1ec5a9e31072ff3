// Package testenv runs a real Kubernetes control plane on loopback for tests,
// benchmarks and local development: etcd and kube-apiserver, and optionally
// kube-controller-manager, built from their official Go modules by
// `kloop controlplane install` (or `make controlplane` in kloop's
// repository) into a per-user directory (`kloop controlplane dir` prints
// it). Projects of one's own find them there with no flag or environment
// variable; Options.BinDir and $KLOOP_CONTROLPLANE_BIN (BinDirEnv) override
// it.
//
// Guarantees:
//   - Start returns only once the API server answers /readyz, or an error that
//     says what to fix: a missing binary (run `kloop controlplane install`), a port in
//     use, or a process that exited early, with the last lines of its log.
//   - Stop ends every child and removes the temporary directory. Children are
//     in their own process group and get SIGKILL when the process that
//     started them dies, so a killed, panicking or timed-out test binary
//     leaves nothing running.
//   - Certificates (CA, serving, admin and per-user client certificates) are
//     generated in Go; no external tools are needed.
//
// Not guaranteed: there is no scheduler and no kubelet, so Pods stay Pending
// unless something (such as samples/podsim) binds them. Compact alone does not
// empty the API server's watch cache; see Compact and CompactAndRestart.
//
// Tests use StartT, which stops the Env in t.Cleanup and prints the process
// logs when the test failed, or Shared for one control plane per package.
//
// The short tier starts no control plane: in a test binary run with
// `go test -short`, Start refuses (ErrShort) and StartT and Shared.Env skip
// the test, so that an end-to-end test cannot slip into `make test-short`.
package testenv
