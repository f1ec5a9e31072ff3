package kloopfake_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	testenv.DetectMutations() // as every kloop test binary has it
	goleak.VerifyTestMain(m)
}
