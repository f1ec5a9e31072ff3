// Package tracing holds what the client and the controller share to trace
// a program's reconciles and writes with OpenTelemetry (the API alone; the
// SDK and the OTLP exporter are package traceexport's, used by the App):
// the instrumentation scope and the names of the spans' attributes. The
// span of the write that left an object at a resourceVersion is the
// client's (client.Client.WroteSpan), so that the reconcile that write
// wakes links to it.
package tracing

import (
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
