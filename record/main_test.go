package record

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}
