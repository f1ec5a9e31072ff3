// Package oteltest holds the tests that send kloop's traces to the
// OpenTelemetry Collector's OTLP/HTTP receiver, run as a library on
// loopback: the exporter's endpoint as documented, and an App's reconciles,
// their causes and their writes as spans.
//
// It is a module of its own, so that the Collector, which only these tests
// use, and what comes with it (gRPC, grpc-gateway, the Collector's config
// modules) stay out of kloop's main module and of its users' module graphs.
package oteltest
