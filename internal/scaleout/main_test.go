package scaleout_test

import (
	"os"
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// cp is the control plane of the tests with sharded list and watch on
// (testenv's default); the tests with it off start their own.
var cp testenv.Shared

// The test binary is also the replica program: run with replicaEnv set, it
// is one Foo-controller replica (see replica_test.go) instead of the tests,
// with fleetDirEnv set too, one replica over a fleet (fleet_replica_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(fleetDirEnv) != "" {
		os.Exit(fleetReplicaMain())
	}
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain())
	}
	cp.Main(m)
}
