// Package faults holds kloop's fault tests: end-to-end tests that put the
// network path to a real API server, the API server itself or etcd into
// trouble (through testenv's Proxy, API Priority and Fairness, restarts) and
// check what informers, controllers and leader election promise under it.
//
// It has no API. docs/faults.md lists each fault, the
// bound kloop keeps under it and the test here that shows it. The tests run
// with `make test` and alone with `make test-faults`; under -short they are
// skipped.
package faults
