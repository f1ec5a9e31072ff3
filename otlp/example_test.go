package otlp_test

import (
	"log"

	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/otlp"
)

// A program that traces sets Options.Traces from New: with the endpoint
// "" the OTEL_* environment decides, and New returns nil (no tracing, no
// goroutine) when it asks for none.
func ExampleNew() {
	opts := kloop.Options{Name: "foo-controller"}
	var err error
	if opts.Traces, err = otlp.New(opts, ""); err != nil {
		log.Fatal(err) // such as OTEL_EXPORTER_OTLP_PROTOCOL=grpc, saying what to set
	}
	app, err := kloop.New(&rest.Config{Host: "https://127.0.0.1:6443"}, opts)
	if err != nil {
		log.Fatal(err)
	}
	_ = app // declare controllers, then app.Run(ctx): it sends the last spans when it stops
}
