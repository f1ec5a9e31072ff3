// Package otlp sends an App's traces over OTLP/HTTP: its own
// implementation of the OpenTelemetry trace API (spans recorded as compact
// structs, encoded in batches straight into OTLP protobuf and posted to
// the receiver), configured by the standard OTEL_* environment variables
// or by an endpoint given in code or on the command line, behind a bounded
// queue that never makes a reconcile wait. A program traces by importing
// it and setting kloop.Options.Traces to what New returns (cli does so,
// for --trace-endpoint and the environment); a program that does not
// import it starts nothing for traces. Neither links the OpenTelemetry
// SDK, its exporters or gRPC.
//
// What it guarantees: a span never waits for the receiver (one that ends
// with the queue full is dropped and counted in
// kloop_trace_spans_dropped_total, reason queue_full; a batch the receiver
// does not take is counted with reason export_failed; the spans it took in
// kloop_trace_spans_exported_total), and nothing runs until a span ends.
// A batch the receiver answers 429, 502, 503 or 504 is sent again, after
// its Retry-After or a back-off, within OTEL_BSP_EXPORT_TIMEOUT (not once
// Shutdown has begun).
// A span keeps at most 128 attributes, events and links (the SDK's
// defaults; the rest are counted as dropped in the span).
// What it does not: OTLP over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc is an
// error saying to use http/protobuf), or other exporters (a program that
// wants them sets Options.Traces to an SDK TracerProvider of its own).
package otlp
