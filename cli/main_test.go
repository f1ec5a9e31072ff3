package cli_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	testenv.DetectMutations() // as every kloop test binary has it
	// klog's flush daemon starts once klog is configured (Logging.Setup).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}
