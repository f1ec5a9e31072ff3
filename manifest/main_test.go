package manifest_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the control plane of InstallCRD's tests.
var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }
