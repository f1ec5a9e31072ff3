package foo_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the one control plane of this package's end-to-end tests,
// with kube-controller-manager so that Deployments get ReplicaSets and pods
// and owned objects are garbage-collected, and its resourcequota-controller
// so that a ResourceQuota is enforced. Each test works in a namespace
// of its own.
var controlPlane = testenv.Shared{Options: testenv.Options{ControllerManager: true, Controllers: []string{"resourcequota-controller"}}, Examples: "^ExampleRun$"}

func TestMain(m *testing.M) {
	controlPlane.Main(m)
}
