package oteltest

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the one control plane of the end-to-end tests; each works
// in a namespace of its own.
var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }
