package notifier

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// logFetcher reads the last lines of a container's previous log through
// the API server's pods/log subresource (previous=true), which the API
// server serves by asking the node's kubelet.
type logFetcher struct {
	host   string
	client *http.Client
	lines  int
	redact []*regexp.Regexp
}

// logTimeout bounds one pods/log request: a notification waits for it.
const logTimeout = 5 * time.Second

// maxLogLine bounds one line of a log, in bytes.
const maxLogLine = 1024

// defaultRedactions hide the values of what looks like a credential in a
// log line: key=value and key: value for password, secret, token, api key
// and credential keys, and bearer tokens. incidents.redact adds more.
var defaultRedactions = []string{
	`(?i)((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|credential)s?["']?\s*[=:]\s*["']?)[^\s"',;&]+`,
	`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+`,
}

func newLogFetcher(cfg *rest.Config, lines int, extra []string) (*logFetcher, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("notifier: the client for pods/log: %w", err)
	}
	rs, err := compileRedactions(extra)
	if err != nil {
		return nil, err
	}
	return &logFetcher{host: strings.TrimSuffix(cfg.Host, "/"), client: hc, lines: lines, redact: rs}, nil
}

func compileRedactions(extra []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range append(append([]string(nil), defaultRedactions...), extra...) {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("incidents.redact: %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// fetch returns the redacted last lines of the previous log of container
// in pod namespace/name, or why there are none.
func (f *logFetcher) fetch(ctx context.Context, namespace, name, container string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	q := url.Values{"previous": {"true"}, "tailLines": {fmt.Sprint(f.lines)}, "limitBytes": {fmt.Sprint(f.lines * maxLogLine)}}
	if container != "" {
		q.Set("container", container)
	}
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s/log?%s", f.host, url.PathEscape(namespace), url.PathEscape(name), q.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the API server did not answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(f.lines*maxLogLine)+1))
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the API server answered %s: %s", resp.Status, statusMessage(body))
	}
	return f.format(body), nil
}

// statusMessage is the message of a metav1.Status body, else the body.
func statusMessage(body []byte) string {
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return strings.TrimSpace(string(body))
}

// format splits a log into its last lines, each cut to maxLogLine bytes
// and redacted.
func (f *logFetcher) format(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), len(body)+1)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > maxLogLine {
			line = line[:maxLogLine] + "…"
		}
		for _, re := range f.redact {
			line = re.ReplaceAllString(line, "${1}"+Redacted)
		}
		out = append(out, line)
	}
	if len(out) > f.lines {
		out = out[len(out)-f.lines:]
	}
	return out
}
