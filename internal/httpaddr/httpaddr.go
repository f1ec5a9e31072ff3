// Package httpaddr bridges cli's two addresses (--metrics-bind-address and
// --health-probe-bind-address) to the one HTTP server of the Run functions
// that predate the kloop builder (samples/foo, samples/podwatch,
// notifier), which serve /metrics, /healthz and /readyz together. It goes
// once every command is on kloop.New.
package httpaddr

import "github.com/kloop-dev/kloop/cli"

// One returns the one address to serve at: whichever of metrics and health
// is set ("" for off), and a *cli.UsageError when both are set and differ.
func One(metrics, health string) (string, error) {
	switch {
	case metrics != "" && health != "" && metrics != health:
		return "", cli.Usagef("--metrics-bind-address %s and --health-probe-bind-address %s: this command serves /metrics, /healthz and /readyz from one server; give one of them, or the same address to both", metrics, health)
	case metrics != "":
		return metrics, nil
	}
	return health, nil
}
