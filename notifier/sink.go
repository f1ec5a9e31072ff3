package notifier

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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

// webhookPayload is kubewatch's webhook body plus, in addition, the
// changed fields of an update and the object.
type webhookPayload struct {
	EventMeta eventMeta      `json:"eventmeta"`
	Text      string         `json:"text"`
	Time      string         `json:"time"`
	Changes   []string       `json:"changes,omitempty"`
	Object    map[string]any `json:"object,omitempty"`
}

type eventMeta struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Reason    string `json:"reason"`
}

func webhookBody(ev *Event, includeObject bool) ([]byte, error) {
	p := webhookPayload{
		EventMeta: eventMeta{Kind: ev.Kind, Name: ev.Name, Namespace: ev.Namespace, Reason: ev.Type.Reason()},
		Text:      ev.Message(),
		Time:      ev.Time.Format(time.RFC3339Nano),
		Changes:   ev.Changes,
	}
	if includeObject {
		p.Object = ev.Object
	}
	return json.Marshal(p)
}

// slackPayload is the body of a Slack incoming webhook, with the fields
// kubewatch's slackwebhook handler sets.
type slackPayload struct {
	Username  string `json:"username,omitempty"`
	IconEmoji string `json:"icon_emoji,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Text      string `json:"text"`
}

func slackBody(ev *Event, s SinkConfig) ([]byte, error) {
	return json.Marshal(slackPayload{Username: s.Username, IconEmoji: s.Emoji, Channel: s.Channel, Text: ev.Message()})
}

// httpSender POSTs a JSON body built from the event.
type httpSender struct {
	url string
	// logURL is url without its path and query, for errors and logs: a
	// Slack webhook's path, or a token in the query, is a credential.
	logURL string
	client *http.Client
	body   func(*Event) ([]byte, error)
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

func newHTTPSender(s SinkConfig) (*httpSender, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.Cert != "" || s.TLSSkip {
		// A transport of the sink's own: kubewatch changed
		// http.DefaultTransport for the whole process.
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
		tr.TLSClientConfig = tc
	}
	h := &httpSender{url: s.URL, logURL: redactURL(s.URL), client: &http.Client{Transport: tr, Timeout: requestTimeout}}
	switch s.Type {
	case SinkWebhook:
		include := s.IncludeObject
		h.body = func(ev *Event) ([]byte, error) { return webhookBody(ev, include) }
	case SinkSlackWebhook:
		h.body = func(ev *Event) ([]byte, error) { return slackBody(ev, s) }
	default:
		return nil, fmt.Errorf("sink %s: type %q is not an HTTP sink", s.Name, s.Type)
	}
	return h, nil
}

func (h *httpSender) send(ctx context.Context, ev *Event) error {
	body, err := h.body(ev)
	if err != nil {
		return fmt.Errorf("encoding the payload: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request to %s: %w", h.logURL, h.redact(err))
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
}

func (l *logSender) send(_ context.Context, ev *Event) error {
	var line []byte
	if l.format == "json" {
		b, err := webhookBody(ev, false)
		if err != nil {
			return fmt.Errorf("encoding the line: %w", err)
		}
		line = append(b, '\n')
	} else {
		name := ev.Name
		if ev.Namespace != "" {
			name = ev.Namespace + "/" + name
		}
		s := fmt.Sprintf("%s %s %s %s", ev.Time.Format(time.RFC3339), ev.Type.Reason(), ev.Kind, name)
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
