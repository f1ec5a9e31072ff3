package notifier

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kloop-dev/kloop/testenv"
)

// controlPlane is the one control plane of this package's end-to-end
// tests, started on first use; each test works in a namespace of its own.
var controlPlane testenv.Shared

func TestMain(m *testing.M) {
	// slack-go's test server keeps, for the life of the process, one
	// goroutine per websocket that fed its RTM stream (a range over a
	// channel it never closes).
	controlPlane.Main(m, goleak.IgnoreAnyFunction("github.com/slack-go/slack/slacktest.handlePendingMessages"))
}
