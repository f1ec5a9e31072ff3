package tracing

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestEnabled_FollowsTheOTELVariables(t *testing.T) {
	for _, c := range []struct {
		vars     map[string]string
		endpoint string
		on       bool
		err      string
	}{
		{vars: nil, on: false},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_TRACES_EXPORTER": "none"}, on: false},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}, on: false},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, endpoint: "http://127.0.0.1:4318", on: true},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin": kloop exports traces with OTLP only`},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": kloop sends traces over OTLP/HTTP: set it to http/protobuf`},
		{endpoint: "127.0.0.1:4318", err: `trace endpoint "127.0.0.1:4318": give the OTLP/HTTP receiver's URL`},
	} {
		on, err := Enabled(c.endpoint, env(c.vars))
		if on != c.on || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Enabled(%q, %v) = %v, %v; want %v, %q", c.endpoint, c.vars, on, err, c.on, c.err)
		}
	}
}
