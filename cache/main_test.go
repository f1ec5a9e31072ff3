package cache_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/cache"
)

func TestMain(m *testing.M) {
	cache.DetectMutations() // as every kloop test binary has it
	goleak.VerifyTestMain(m)
}
