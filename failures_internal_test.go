package kloop

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kloop-dev/kloop/controller"
)

type namedFailure struct{ error }

func (namedFailure) EventReason() string { return "DeploymentInvalid" }

func TestFailureEvent_TheReasonOfTheOutermostNamingErrorElseReconcileFailed(t *testing.T) {
	inner := errors.New(`Deployment.apps "Bad_Name!" is invalid`)
	for _, tc := range []struct {
		name         string
		err          error
		reason, text string
	}{
		{"plain", fmt.Errorf("create: %w", inner), ReasonReconcileFailed, `create: Deployment.apps "Bad_Name!" is invalid`},
		{"terminal", controller.TerminalError(inner), ReasonReconcileFailed, inner.Error()},
		{"named", fmt.Errorf("sync: %w", namedFailure{inner}), "DeploymentInvalid", inner.Error()},
		{"named terminal", namedFailure{controller.TerminalError(inner)}, "DeploymentInvalid", inner.Error()},
	} {
		reason, text := failureEvent(tc.err)
		if reason != tc.reason || text != tc.text {
			t.Errorf("%s: failureEvent = %q, %q; want %q, %q", tc.name, reason, text, tc.reason, tc.text)
		}
	}
}
