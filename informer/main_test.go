package informer_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is for the Examples; the end-to-end tests start their own,
// which they restart.
var controlPlane = testenv.Shared{Examples: "^ExampleFactory$"}

// The end-to-end tests use client-go, whose connection pools and klog's
// flush daemon live as long as the process: Main's goleak check ignores
// them.
func TestMain(m *testing.M) { controlPlane.Main(m) }
