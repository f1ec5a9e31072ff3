package notifier

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sender delivers one event once. Its errors say whether trying again may
// help (see sendError).
type sender interface {
	send(ctx context.Context, ev *Event) error
}

// sendError is a failed delivery.
type sendError struct {
	// retryable: a network error, a 5xx or a 429.
	retryable bool
	// status is the HTTP status, 0 for a network error.
	status int
	// retryAfter is the server's Retry-After, if it gave one in seconds.
	retryAfter time.Duration
	err        error
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// isRetryable reports whether err is worth another attempt: everything but
// a refusal by the receiver (4xx other than 429) and an unencodable event.
func isRetryable(err error) bool {
	var se *sendError
	if errors.As(err, &se) {
		return se.retryable
	}
	return false
}

// newSender builds the sender of a sink and what closes it (nil if
// nothing). now is the process start, for cloudevent ids.
func newSender(s SinkConfig, text textFunc, out io.Writer, outMu *sync.Mutex, now time.Time) (sender, func(), error) {
	switch s.Type {
	case SinkLog:
		l := &logSender{mu: outMu, out: out, format: s.Format}
		if s.Template != "" || s.Incidents {
			l.text = text
		}
		return l, nil, nil
	case SinkSlack:
		sl, err := newSlackSender(s, text)
		if err != nil {
			return nil, nil, err
		}
		return sl, sl.close, nil
	case SinkCloudEvent:
		c, err := newCloudEventSender(s, text, now)
		if err != nil {
			return nil, nil, err
		}
		return c, c.close, nil
	case SinkSMTP:
		m, err := newSMTPSender(s, text)
		if err != nil {
			return nil, nil, err
		}
		return m, nil, nil
	}
	h, err := newHTTPSender(s, text)
	if err != nil {
		return nil, nil, err
	}
	return h, h.close, nil
}

// httpSender POSTs a JSON body built from the event.
type httpSender struct {
	url string
	// logURL is url without its path and query, for errors and logs: a
	// Slack webhook's path, or a token in the query, is a credential.
	logURL string
	// header is set on every request (hipchat's bearer token).
	header http.Header
	client *http.Client
	text   textFunc
	body   func(ev *Event, text string) ([]byte, error)
}

// redactURL returns scheme://host/... of raw, keeping neither user
// information, path nor query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host + "/..."
}

// requestTimeout bounds one attempt.
const requestTimeout = 10 * time.Second

// DefaultHipchatURL is the HipChat API base URL unless the sink sets one.
const DefaultHipchatURL = "https://api.hipchat.com/v2"

// httpClient returns a client with a transport of the sink's own, trusting
// the CAs in s.Cert or skipping verification if s.TLSSkip. kubewatch
// changed http.DefaultTransport for the whole process instead.
func httpClient(s SinkConfig) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tc, err := tlsConfig(s)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr, Timeout: requestTimeout}, nil
}

// tlsConfig is nil unless the sink sets cert or tlsskip.
func tlsConfig(s SinkConfig) (*tls.Config, error) {
	if s.Cert == "" && !s.TLSSkip {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: s.TLSSkip} //nolint:gosec // asked for by tlsskip
	if s.Cert != "" {
		pem, err := os.ReadFile(s.Cert)
		if err != nil {
			return nil, fmt.Errorf("sink %s: cert: %w", s.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sink %s: cert %s holds no PEM certificate", s.Name, s.Cert)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// httpBodies are the JSON bodies of the sinks that POST to a URL.
var httpBodies = map[string]func(ev *Event, text string, s SinkConfig) ([]byte, error){
	SinkWebhook:      webhookBody,
	SinkSlackWebhook: slackWebhookBody,
	SinkMattermost:   mattermostBody,
	SinkFlock:        flockBody,
	SinkLark:         larkBody,
	SinkHipchat:      hipchatBody,
	SinkMSTeams: func(ev *Event, text string, s SinkConfig) ([]byte, error) {
		if s.Card == CardAdaptive {
			return adaptiveCardBody(ev, text, s)
		}
		return messageCardBody(ev, text, s)
	},
}

func newHTTPSender(s SinkConfig, text textFunc) (*httpSender, error) {
	body, ok := httpBodies[s.Type]
	if !ok {
		return nil, fmt.Errorf("sink %s: type %q is not an HTTP sink", s.Name, s.Type)
	}
	client, err := httpClient(s)
	if err != nil {
		return nil, err
	}
	if text == nil {
		text, _ = newTextFunc(s.Name, "")
	}
	target := s.URL
	h := &httpSender{client: client, text: text, header: http.Header{}}
	if s.Type == SinkHipchat {
		base := strings.TrimSuffix(orDefault(s.URL, DefaultHipchatURL), "/")
		target = base + "/room/" + url.PathEscape(s.Room) + "/notification"
		h.header.Set("Authorization", "Bearer "+s.Token)
	}
	h.url, h.logURL = target, redactURL(target)
	h.body = func(ev *Event, text string) ([]byte, error) { return body(ev, text, s) }
	return h, nil
}

func (h *httpSender) send(ctx context.Context, ev *Event) error {
	text, err := h.text(ev)
	if err != nil {
		return err
	}
	body, err := h.body(ev, text)
	if err != nil {
		return fmt.Errorf("encoding the payload: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request to %s: %w", h.logURL, h.redact(err))
	}
	for k, v := range h.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		// A certificate that does not verify will not verify next time.
		var certErr *tls.CertificateVerificationError
		return &sendError{retryable: !errors.As(err, &certErr), err: h.redact(err)}
	}
	// Read a little of the body for the log, and drain it so the
	// connection is reused.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &sendError{
		status:    resp.StatusCode,
		retryable: resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
		err:       fmt.Errorf("POST %s: %s: %s", h.logURL, resp.Status, strings.TrimSpace(string(snippet))),
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		se.retryAfter = time.Duration(s) * time.Second
	}
	return se
}

// redact replaces the URL in the *url.Error that net/http returns.
func (h *httpSender) redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = h.logURL
	}
	return err
}

func (h *httpSender) close() { h.client.CloseIdleConnections() }

// logSender writes one line per event.
type logSender struct {
	mu     *sync.Mutex // shared by every log sink writing to out
	out    io.Writer
	format string
	// text, if set, is the sink's template: the line is its text.
	text textFunc
}

func (l *logSender) send(_ context.Context, ev *Event) error {
	var line []byte
	switch {
	case l.text != nil:
		s, err := l.text(ev)
		if err != nil {
			return err
		}
		line = []byte(s + "\n")
	case l.format == "json":
		b, err := webhookBody(ev, ev.Message(), SinkConfig{IncludeChanges: true})
		if err != nil {
			return fmt.Errorf("encoding the line: %w", err)
		}
		line = append(b, '\n')
	default:
		name := ev.Name
		if ev.Namespace != "" {
			name = ev.Namespace + "/" + name
		}
		s := fmt.Sprintf("%s %s %s %s", ev.Time.Format(time.RFC3339), ev.Reason(), ev.Kind, name)
		if len(ev.Changes) > 0 {
			s += " changes=" + strings.Join(ev.Changes, ",")
		}
		line = []byte(s + "\n")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.out.Write(line); err != nil {
		return &sendError{retryable: true, err: err}
	}
	return nil
}
