package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// sender posts encoded requests to the receiver's traces URL, as the
// OTEL_EXPORTER_OTLP_* variables say (each also as
// OTEL_EXPORTER_OTLP_TRACES_*, which wins).
type sender struct {
	url     string
	headers http.Header
	gzip    bool
	client  *http.Client

	zbuf bytes.Buffer // the gzipped body, reused
	zw   *gzip.Writer
}

func newSender(endpoint string, getenv func(string) string) (*sender, error) {
	// env is the traces variable if set, else the general one.
	env := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + name, v
		}
		return "OTEL_EXPORTER_OTLP_" + name, strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
	s := &sender{headers: http.Header{}}
	var err error
	if s.url, err = traces(endpoint, getenv, env); err != nil {
		return nil, err
	}
	if _, v := env("HEADERS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if val, err = url.PathUnescape(val); !ok || k == "" || err != nil {
				continue // as the SDK does: a malformed pair is skipped
			}
			s.headers.Set(k, strings.TrimSpace(val))
		}
	}
	s.headers.Set("Content-Type", "application/x-protobuf")
	s.headers.Set("User-Agent", "kloop OTLP/HTTP")
	switch name, v := env("COMPRESSION"); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		s.gzip = true
		s.headers.Set("Content-Encoding", "gzip")
		s.zw = gzip.NewWriter(&s.zbuf)
	default:
		return nil, fmt.Errorf("%s=%q: set it to gzip or none", name, v)
	}
	timeout := 10 * time.Second
	if name, v := env("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%q: give the export timeout in milliseconds", name, v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tr.TLSClientConfig, err = tlsConfig(env); err != nil {
		return nil, err
	}
	s.client = &http.Client{Transport: tr, Timeout: timeout}
	return s, nil
}

// traces is the URL spans are posted to: endpoint (see tracesURL), else
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT's path with /v1/traces after it, else
// localhost:4318 (https unless OTEL_EXPORTER_OTLP_INSECURE=true).
func traces(endpoint string, getenv func(string) string, env func(string) (string, string)) (string, error) {
	if endpoint != "" {
		return tracesURL(endpoint), nil
	}
	parse := func(name string) (*url.URL, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil, nil
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s=%q: give the OTLP/HTTP receiver's URL, such as http://127.0.0.1:4318", name, v)
		}
		return u, nil
	}
	u, err := parse("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if err != nil {
		return "", err
	}
	if u != nil {
		if u.Path == "" {
			u.Path = "/"
		}
		return u.String(), nil
	}
	if u, err = parse("OTEL_EXPORTER_OTLP_ENDPOINT"); err != nil {
		return "", err
	}
	if u != nil {
		u.Path = path.Join(u.Path, "/v1/traces")
		return u.String(), nil
	}
	scheme := "https"
	if _, v := env("INSECURE"); strings.EqualFold(v, "true") {
		scheme = "http"
	}
	return scheme + "://localhost:4318/v1/traces", nil
}

// tlsConfig is the CA (OTEL_EXPORTER_OTLP_CERTIFICATE) and the client
// certificate (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY), if
// set: PEM files.
func tlsConfig(env func(string) (string, string)) (*tls.Config, error) {
	caName, ca := env("CERTIFICATE")
	certName, cert := env("CLIENT_CERTIFICATE")
	keyName, key := env("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caName, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%q: no PEM certificate in it", caName, ca)
		}
	}
	if cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, fmt.Errorf("%s and %s: set both, or neither", certName, keyName)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certName, keyName, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// post sends one encoded request, and returns an error when the receiver
// does not take it.
func (s *sender) post(ctx context.Context, body []byte) error {
	if s.gzip {
		s.zbuf.Reset()
		s.zw.Reset(&s.zbuf)
		if _, err := s.zw.Write(body); err != nil {
			return err
		}
		if err := s.zw.Close(); err != nil {
			return err
		}
		body = s.zbuf.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = s.headers
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, resp.Body) // so that the connection is reused
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	err = fmt.Errorf("POST %s: %s: %s", s.url, resp.Status, bytes.TrimSpace(msg))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		// The OTLP/HTTP specification's retryable answers: the receiver
		// may take the same request later, after Retry-After if it says.
		after := time.Duration(-1)
		if secs, perr := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); perr == nil && secs >= 0 {
			after = time.Duration(secs) * time.Second
		}
		return &refused{err: err, after: after}
	}
	return err
}

// refused is an answer the receiver says to send again later: after, or
// when after is negative, after a back-off of the sender's choosing.
type refused struct {
	err   error
	after time.Duration
}

func (r *refused) Error() string { return r.err.Error() }
func (r *refused) Unwrap() error { return r.err }

// close closes the connections kept for the next request.
func (s *sender) close() { s.client.CloseIdleConnections() }
