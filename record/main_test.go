package record_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is for the Examples.
var controlPlane = testenv.Shared{Examples: "^Example$"}

func TestMain(m *testing.M) { controlPlane.Main(m) }
