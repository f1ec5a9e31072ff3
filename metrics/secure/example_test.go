package secure_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/metrics"
	"github.com/kloop-dev/kloop/metrics/secure"
)

// Serve the kloop registry's metrics over TLS to callers the API server
// authenticates and authorizes for get /metrics: a caller without a token
// is refused with 401, one whose ServiceAccount has no RBAC rule for
// /metrics with 403.
func Example() {
	cfg := controlPlane.ExampleEnv().Config // yours: rest.InClusterConfig()
	// Self-signed; CertDir for a certificate from a mounted Secret.
	s, err := secure.New(cfg, secure.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	lis, err := net.Listen("tcp", "127.0.0.1:0") // in a Pod: ":8443"
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: s.Wrap(mux), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tls.NewListener(lis, s.TLSConfig())) }()
	defer func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()

	// Callers: one without a token, one with the token of a ServiceAccount
	// that no RBAC rule lets read /metrics.
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "example-scraper"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		panic(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "example-scraper", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the certificate is self-signed
	defer scraper.CloseIdleConnections()
	for _, token := range []string{"", tr.Status.Token} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+lis.Addr().String()+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// Output:
	// 401 Unauthorized
	// 403 Forbidden
}
