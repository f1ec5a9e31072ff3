package watcher

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	// The end-to-end tests use client-go, whose connection pools and klog's
	// flush daemon live as long as the process.
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}
