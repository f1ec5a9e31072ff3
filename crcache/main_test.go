package crcache_test

import (
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is shared by the package's tests; each works in namespaces
// of its own.
var controlPlane testenv.Shared

// controller-runtime's own logs (the operator's manager) are not wanted in
// test output; kloop's informers log through log/slog.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	controlPlane.Main(m)
}
