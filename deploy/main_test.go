package deploy_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

// binDir holds the commands the tests build (see binary).
var binDir string

// Each test that needs an API server starts a control plane of its own
// (the bases share cluster-scoped names, and the least-privilege tests
// change the roles they apply).
func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "kloop-deploy-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	if code == 0 {
		if err := goleak.Find(testenv.GoleakIgnores()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
