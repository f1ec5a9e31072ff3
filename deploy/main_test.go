package deploy_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

// Each test that needs an API server starts a control plane of its own
// (the bases share cluster-scoped names, and the least-privilege tests
// change the roles they apply).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}
