package secure_test

import (
	"log"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/metrics"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// Serve the kloop registry's metrics over TLS to callers the API server
// authenticates and authorizes for get /metrics.
func Example() {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	s, err := secure.New(cfg, secure.Options{}) // self-signed; CertDir for a mounted Secret
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	lis, err := net.Listen("tcp", ":8443")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(s.Listener(lis), s.Wrap(mux)))
}
