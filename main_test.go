package kloop_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the one control plane of this package's end-to-end tests
// (with kube-controller-manager, for Deployments' and Jobs' pods and garbage
// collection); each test works in a namespace of its own. A second
// --controllers adds to testenv's list (it is a string slice flag).
var controlPlane = testenv.Shared{Options: testenv.Options{
	ControllerManager:      true,
	ControllerManagerFlags: []string{"--controllers=job-controller"},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
