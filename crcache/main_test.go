package crcache_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is shared by the package's tests; each works in namespaces
// of its own.
var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }
