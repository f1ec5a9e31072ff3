package fleet_test

import (
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// The fleet's end-to-end tests start control planes of their own.
var noShared testenv.Shared

func TestMain(m *testing.M) { noShared.Main(m) }
