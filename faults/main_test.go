package faults

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is shared by the tests that only fault the path to it; the
// tests that fault the API server or etcd start their own.
var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }
