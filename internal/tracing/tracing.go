// Package tracing holds what the client and the controller share to trace
// a program's reconciles and writes with OpenTelemetry (the API alone; the
// SDK and the OTLP exporter are package otlp's, which only a program that
// traces imports): the instrumentation scope, the names of the spans'
// attributes, and the reading of the OTEL_* environment that says whether
// traces are asked for. The
// span of the write that left an object at a resourceVersion is the
// client's (client.Client.WroteSpan), so that the reconcile that write
// wakes links to it.
package tracing

import (
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Scope is the instrumentation scope of kloop's spans.
const Scope = "github.com/kloop-dev/kloop"

// Attributes of the spans.
const (
	Controller      = attribute.Key("kloop.controller")
	Key             = attribute.Key("kloop.key")
	Outcome         = attribute.Key("kloop.outcome")
	Causes          = attribute.Key("kloop.causes")
	CausesTotal     = attribute.Key("kloop.causes.total")
	SelfTriggered   = attribute.Key("kloop.self_triggered")
	RequeueAfter    = attribute.Key("kloop.requeue_after_seconds")
	Cause           = attribute.Key("kloop.cause")
	Verb            = attribute.Key("kloop.write.verb")
	Resource        = attribute.Key("kloop.write.resource")
	Namespace       = attribute.Key("k8s.namespace.name")
	Name            = attribute.Key("kloop.write.name")
	Subresource     = attribute.Key("kloop.write.subresource")
	Written         = attribute.Key("kloop.write.resource_version")
	ResourceVersion = attribute.Key("kloop.cause.resource_version")
)

// Enabled reports whether endpoint (given in code or on the command line)
// or the OTEL_* environment, read with getenv, asks for traces, and
// returns an error for a setting kloop cannot honour, saying what to set
// instead. Traces are on with an endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_ENDPOINT, or endpoint) or OTEL_TRACES_EXPORTER=otlp,
// unless OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true (endpoint
// wins over both). It reads the environment only: a program that does not
// trace calls it to say so when the environment asks.
func Enabled(endpoint string, getenv func(string) string) (bool, error) {
	if endpoint != "" {
		if err := CheckEndpoint(endpoint); err != nil {
			return false, err
		}
		return protocol(getenv)
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch exp {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: kloop exports traces with OTLP only: set it to otlp (or leave it unset) with OTEL_EXPORTER_OTLP_ENDPOINT, or to none", exp)
	}
	if exp == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return false, nil
	}
	return protocol(getenv)
}

// protocol reports whether the protocol asked for is one kloop sends.
func protocol(getenv func(string) string) (bool, error) {
	name, p := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		name, p = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p != "" && p != "http/protobuf" {
		return false, fmt.Errorf("%s=%q: kloop sends traces over OTLP/HTTP: set it to http/protobuf (or leave it unset) and point the endpoint at the collector's OTLP/HTTP port (4318)", name, p)
	}
	return true, nil
}

// CheckEndpoint checks an OTLP/HTTP endpoint given in code or on the
// command line: an http or https URL with a host.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("trace endpoint %q: give the OTLP/HTTP receiver's URL, such as http://127.0.0.1:4318", endpoint)
	}
	return nil
}
