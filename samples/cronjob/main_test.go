package cronjob_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the one control plane of this package's end-to-end tests,
// with kube-controller-manager running testenv's controllers and the Job
// controller (so Jobs get pods). Each test works in a
// namespace of its own.
var controlPlane = testenv.Shared{Options: testenv.Options{ControllerManager: true, Controllers: []string{"job-controller"}}}

func TestMain(m *testing.M) {
	controlPlane.Main(m)
}
