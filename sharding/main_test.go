package sharding_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// cp is the control plane of the end-to-end tests, with sharded list and
// watch on (testenv's default).
var cp testenv.Shared

func TestMain(m *testing.M) { cp.Main(m) }
