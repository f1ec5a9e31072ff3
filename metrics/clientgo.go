package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// The requests that client-go's REST clients make, as every kloop client,
// informer and elector makes them, counted on Registry:
//
//   - kloop_rest_client_requests_total{code, method, host}: every answer
//     (code "<error>" when there was none, such as a connection refused);
//   - kloop_rest_client_request_retries_total{code, method, host}: the
//     retries client-go made itself, such as after a 429 Too Many Requests
//     with Retry-After, which it waits out (up to 10 times) before the
//     caller sees the error; code is the retry's own answer. A server that
//     sheds load shows in both: 429 answers, and retries after them.
//
// client-go takes the first registration of these hooks in a process and
// ignores later ones; a program that registers its own first keeps them,
// and these counters then stay at zero.
var (
	restRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kloop_rest_client_requests_total",
		Help: "Requests of client-go REST clients by status code, method and host.",
	}, []string{"code", "method", "host"})
	restRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kloop_rest_client_request_retries_total",
		Help: "Retries client-go REST clients made themselves (for example after 429 with Retry-After), by status code, method and host.",
	}, []string{"code", "method", "host"})
)

func init() {
	Registry.MustRegister(restRequests, restRetries)
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestResult: resultAdapter{restRequests},
		RequestRetry:  retryAdapter{restRetries},
	})
}

type resultAdapter struct{ c *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}

type retryAdapter struct{ c *prometheus.CounterVec }

func (a retryAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}
