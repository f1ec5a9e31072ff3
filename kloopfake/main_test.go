package kloopfake_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is for ExampleStart_controlPlane alone: kloopfake.Start on
// an App of a real API server. Under -short it is left out and nothing
// starts.
var controlPlane = testenv.Shared{Examples: "^ExampleStart_controlPlane$"}

// Main also turns on the mutation detector, as every kloop test binary
// has it, and checks for leaked goroutines.
func TestMain(m *testing.M) { controlPlane.Main(m) }
