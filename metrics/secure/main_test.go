package secure_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the one control plane of this package's tests, started
// on first use; each test works in a namespace of its own.
var controlPlane = testenv.Shared{Examples: "^Example$"}

func TestMain(m *testing.M) { controlPlane.Main(m) }
