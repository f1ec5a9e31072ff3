package debug_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane serves the end-to-end test of the snapshot; the browser test
// starts one of its own, because it stops and starts its API server.
var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }
