package secure_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kloop-dev/kloop/internal/authtest"
	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/metrics/secure"
	"github.com/kloop-dev/kloop/testenv"
)

// cluster is what each test sets up: a namespace, a user for the filter
// with exactly the rights the package documents, a ServiceAccount allowed
// to get /metrics and one that is not.
type cluster struct {
	admin     kubernetes.Interface
	ns        string
	filterCfg *rest.Config
	scraper   string // token of a ServiceAccount bound to get /metrics
	stranger  string // token of a ServiceAccount without that binding
}

func setup(t *testing.T) *cluster {
	t.Helper()
	e := controlPlane.Env(t)
	cs := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, cs, "secure")
	c := &cluster{admin: cs, ns: ns}

	filterUser := "metrics-filter-" + ns
	var err error
	if c.filterCfg, err = e.UserConfig(filterUser); err != nil {
		t.Fatal(err)
	}
	mustCreateClusterRole(t, cs, "auth-"+ns, []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: filterUser})
	mustCreateClusterRole(t, cs, "metrics-reader-"+ns, []rbacv1.PolicyRule{
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"})
	c.scraper = authtest.ServiceAccount(t, cs, ns, "scraper")
	c.stranger = authtest.ServiceAccount(t, cs, ns, "stranger")

	testwait.Authorized(t, cs, authorizationv1.SubjectAccessReviewSpec{User: filterUser,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"}}, true)
	testwait.Authorized(t, cs, authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + ns + ":scraper",
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}, true)
	return c
}

func mustCreateClusterRole(t *testing.T, cs kubernetes.Interface, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serve runs h behind s on a TLS listener on loopback until the test ends
// and returns its https URL.
func serve(t *testing.T, s *secure.Secure, h http.Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Wrap(h), ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tls.NewListener(lis, s.TLSConfig())) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "https://" + lis.Addr().String()
}

func metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "secure_test_scrapes_total", Help: "A counter only this test has."})
	c.Inc()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// client trusts nothing but what pool holds (nil: skip verification, as a
// Prometheus scraping a self-signed endpoint does).
func client(pool *x509.CertPool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, InsecureSkipVerify: pool == nil}}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	return authtest.Get(t, c, url, token)
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestWrap_NoTokenIs401_UnboundUserIs403_BoundUserGetsMetrics(t *testing.T) {
	c := setup(t)
	s, err := secure.New(c.filterCfg, secure.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, s, metricsHandler()) + "/metrics"
	hc := client(nil)
	defer hc.CloseIdleConnections()

	if code, body := get(t, hc, url, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: got %d %q, want 401", code, body)
	}
	if code, body := get(t, hc, url, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a token the API server does not know: got %d %q, want 401", code, body)
	}
	code, body := get(t, hc, url, c.stranger)
	if code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+c.ns+":stranger") || !strings.Contains(body, "get /metrics") {
		t.Errorf("token of a user without the binding: got %d %q, want 403 naming the user, verb and path", code, body)
	}
	code, body = get(t, hc, url, c.scraper)
	if code != http.StatusOK || !strings.Contains(body, "secure_test_scrapes_total 1") {
		t.Errorf("token of the bound user: got %d %q, want 200 and the metrics", code, body)
	}
}

func TestTLSConfig_SelfSignedCertificateNamesLoopbackAndRefusesPlainHTTP(t *testing.T) {
	c := setup(t)
	s, err := secure.New(c.filterCfg, secure.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, s, metricsHandler())

	conn, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	st := conn.ConnectionState()
	conn.Close()
	if st.NegotiatedProtocol == "h2" {
		t.Errorf("negotiated HTTP/2; want http/1.1 only")
	}
	leaf := st.PeerCertificates[0]
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}
	if leaf.NotAfter.Sub(leaf.NotBefore) < 300*24*time.Hour {
		t.Errorf("self-signed certificate valid %v to %v; want about a year", leaf.NotBefore, leaf.NotAfter)
	}
	// Trusting exactly that certificate works too.
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	hc := client(pool)
	defer hc.CloseIdleConnections()
	if code, _ := get(t, hc, base+"/metrics", c.scraper); code != http.StatusOK {
		t.Errorf("verified TLS: got %d, want 200", code)
	}

	plain := &http.Client{Timeout: 10 * time.Second}
	defer plain.CloseIdleConnections()
	code, _ := get(t, plain, "http://"+strings.TrimPrefix(base, "https://")+"/metrics", c.scraper)
	if code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: got %d, want 400 (an HTTP request to an HTTPS server)", code)
	}
}

// countingConfig counts the TokenReviews and SubjectAccessReviews sent
// through a copy of cfg.
func countingConfig(cfg *rest.Config, tokenReviews, accessReviews *atomic.Int32) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
				tokenReviews.Add(1)
			case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
				accessReviews.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWrap_ReusesDecisionsForCacheTTLOnly(t *testing.T) {
	c := setup(t)
	var tokenReviews, accessReviews atomic.Int32
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s, err := secure.New(countingConfig(c.filterCfg, &tokenReviews, &accessReviews), secure.Options{
		CacheTTL: 5 * time.Second, Clock: clk, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, s, metricsHandler()) + "/metrics"
	hc := client(nil)
	defer hc.CloseIdleConnections()
	want := func(step string, reviews int) {
		t.Helper()
		if got, body := get(t, hc, url, c.scraper); got != http.StatusOK {
			t.Fatalf("%s: scraper got %d %q, want 200", step, got, body)
		}
		if got, body := get(t, hc, url, c.stranger); got != http.StatusForbidden {
			t.Fatalf("%s: stranger got %d %q, want 403", step, got, body)
		}
		if tr, ar := tokenReviews.Load(), accessReviews.Load(); tr != int32(reviews) || ar != int32(reviews) {
			t.Errorf("%s: %d TokenReviews and %d SubjectAccessReviews sent, want %d of each", step, tr, ar, reviews)
		}
	}
	want("first scrape of each user", 2)
	want("again, within the TTL", 2)
	clk.SetTime(clk.Now().Add(4 * time.Second))
	want("4s later", 2)
	clk.SetTime(clk.Now().Add(time.Second))
	want("5s later: the TTL is over", 4)
}

func TestWrap_FilterWithoutReviewRightsAnswers500AndCachesNothing(t *testing.T) {
	c := setup(t)
	e := controlPlane.Env(t)
	nobody, err := e.UserConfig("no-rights-" + c.ns)
	if err != nil {
		t.Fatal(err)
	}
	var tokenReviews, accessReviews atomic.Int32
	s, err := secure.New(countingConfig(nobody, &tokenReviews, &accessReviews), secure.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, s, metricsHandler()) + "/metrics"
	hc := client(nil)
	defer hc.CloseIdleConnections()
	for i := range 2 {
		if code, body := get(t, hc, url, c.scraper); code != http.StatusInternalServerError {
			t.Errorf("scrape %d: got %d %q, want 500 (the filter may not create TokenReviews)", i, code, body)
		}
	}
	if n := tokenReviews.Load(); n != 2 {
		t.Errorf("%d TokenReviews sent for two scrapes, want 2: a failed review must not be cached", n)
	}
}

// writePair writes a fresh self-signed certificate for name and its key
// into dir, as a kubernetes.io/tls Secret is mounted.
func writePair(t *testing.T, dir, name string, mod time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: kb},
	} {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

func servedName(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	cert, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

func TestTLSConfig_ServesTheMountedCertificateAndRereadsItWhenItChanges(t *testing.T) {
	dir := t.TempDir()
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // not asked: no request is served
	if _, err := secure.New(cfg, secure.Options{CertDir: dir, Logger: quiet()}); err == nil {
		t.Fatal("New with an empty CertDir: no error, want one naming the missing certificate")
	}
	t0 := time.Now().Add(-time.Minute)
	writePair(t, dir, "first.example", t0)
	s, err := secure.New(cfg, secure.Options{CertDir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	tc := s.TLSConfig()
	if got := servedName(t, tc); got != "first.example" {
		t.Fatalf("served %q, want the mounted first.example", got)
	}
	writePair(t, dir, "second.example", t0.Add(time.Second))
	if got := servedName(t, tc); got != "second.example" {
		t.Errorf("after the Secret changed: served %q, want second.example", got)
	}
	// A half-written pair keeps the previous certificate.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, tc); got != "second.example" {
		t.Errorf("with a broken key file: served %q, want the previous second.example", got)
	}
}
