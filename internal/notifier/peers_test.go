package notifier

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
)

// The protocol peers of the handler tests, each on loopback and each
// parsing what it receives as the service would. Every peer records what
// it got as text (a JSON body, a Slack message, a CloudEvent, a mail) and
// wakes waiters on each arrival.

// inbox is what one peer received.
type inbox struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func newInbox() *inbox { return &inbox{more: make(chan struct{})} }

func (b *inbox) add(s string) {
	b.mu.Lock()
	b.got = append(b.got, s)
	close(b.more)
	b.more = make(chan struct{})
	b.mu.Unlock()
}

func (b *inbox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

// waitFor waits until some message contains every one of subs and
// returns it.
func (b *inbox) waitFor(t *testing.T, what string, subs ...string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		b.mu.Lock()
		for _, m := range b.got {
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(m, s)
			}
			if ok {
				b.mu.Unlock()
				return m
			}
		}
		more := b.more
		b.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: nothing containing %q within 60s; received:\n%s", what, subs, strings.Join(b.all(), "\n"))
		}
	}
}

// jsonPeer is an HTTP endpoint taking JSON bodies: it records each body
// under its path and answers status (200 unless set).
type jsonPeer struct {
	*httptest.Server
	mu      sync.Mutex
	boxes   map[string]*inbox
	headers map[string][]http.Header
	status  int
}

func newJSONPeer(t *testing.T) *jsonPeer {
	p := &jsonPeer{boxes: map[string]*inbox{}, headers: map[string][]http.Header{}, status: http.StatusOK}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !json.Valid(body) || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: not a JSON request (%s): %s", r.URL.Path, r.Header.Get("Content-Type"), body)
		}
		p.mu.Lock()
		p.headers[r.URL.Path] = append(p.headers[r.URL.Path], r.Header.Clone())
		status := p.status
		p.mu.Unlock()
		p.box(r.URL.Path).add(string(body))
		w.WriteHeader(status)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *jsonPeer) box(path string) *inbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.boxes[path]
	if !ok {
		b = newInbox()
		p.boxes[path] = b
	}
	return b
}

// slackPeer is slack-go's test server: chat.postMessage as Slack parses
// it (form values, the attachments JSON). The server hands every message
// it accepted to its RTM websocket, where the peer reads it back as
// slack.Message JSON.
type slackPeer struct {
	*slacktest.Server
	box *inbox
}

func newSlackPeer(t *testing.T) *slackPeer {
	p := &slackPeer{Server: slacktest.NewTestServer(), box: newInbox()}
	p.Start()
	ws, _, err := websocket.DefaultDialer.Dial(p.GetWSURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				return
			}
			p.box.add(string(m))
		}
	}()
	t.Cleanup(func() {
		// A close frame ends the server's read loop (a dropped
		// connection would not).
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the slack peer's websocket did not close within 10s")
		}
		_ = ws.Close()
		p.Stop()
	})
	return p
}

// messages parses what the Slack peer saw.
func (p *slackPeer) messages(t *testing.T) []slack.Message {
	var out []slack.Message
	for _, s := range p.box.all() {
		var m slack.Message
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("slack message %s: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

// cloudEventPeer is the CloudEvents SDK's own HTTP receiver.
type cloudEventPeer struct {
	URL string
	box *inbox
	mu  sync.Mutex
	evs []cloudevents.Event
}

func newCloudEventPeer(t *testing.T) *cloudEventPeer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudevents.NewClientHTTP(cloudevents.WithListener(l))
	if err != nil {
		t.Fatal(err)
	}
	p := &cloudEventPeer{URL: "http://" + l.Addr().String() + "/", box: newInbox()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.StartReceiver(ctx, func(e cloudevents.Event) {
			b, _ := json.Marshal(e)
			p.mu.Lock()
			p.evs = append(p.evs, e)
			p.mu.Unlock()
			p.box.add(string(b))
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("cloudevent receiver: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the cloudevent receiver did not stop within 30s")
		}
	})
	return p
}

func (p *cloudEventPeer) events() []cloudevents.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.evs)
}

// smtpPeer is an SMTP server from go-smtp on loopback, with STARTTLS (or
// implicit TLS) and AUTH over the given mechanisms; it records each mail
// it accepts, headers and body as sent.
type smtpPeer struct {
	Addr   string
	CAFile string
	box    *inbox
	mechs  []string
	mu     sync.Mutex
	authed []string // the mechanism of each successful AUTH
	froms  []string
	rcpts  [][]string
	helos  []string
}

const (
	smtpUser     = "kw"
	smtpPassword = "pw-9f3e"
	smtpSecret   = "cram-secret"
)

// newSMTPPeer starts the server. implicitTLS serves TLS from the first
// byte; otherwise STARTTLS is offered, and AUTH only after it.
func newSMTPPeer(t *testing.T, implicitTLS bool, mechs ...string) *smtpPeer {
	cert, caFile := loopbackCert(t)
	p := &smtpPeer{CAFile: caFile, box: newInbox(), mechs: mechs}
	s := gosmtp.NewServer(p)
	s.Domain = "localhost"
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.ReadTimeout, s.WriteTimeout = 30*time.Second, 30*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = l.Addr().String()
	if implicitTLS {
		l = tls.NewListener(l, s.TLSConfig)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; err != nil && !errors.Is(err, gosmtp.ErrServerClosed) {
			t.Errorf("smtp server: %v", err)
		}
	})
	return p
}

func (p *smtpPeer) NewSession(c *gosmtp.Conn) (gosmtp.Session, error) {
	p.mu.Lock()
	p.helos = append(p.helos, c.Hostname())
	p.mu.Unlock()
	return &smtpSession{p: p}, nil
}

type smtpSession struct {
	p    *smtpPeer
	from string
	to   []string
}

func (s *smtpSession) AuthMechanisms() []string { return s.p.mechs }

func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	ok := func() {
		s.p.mu.Lock()
		s.p.authed = append(s.p.authed, mech)
		s.p.mu.Unlock()
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(identity, user, pass string) error {
			if user != smtpUser || pass != smtpPassword {
				return errors.New("bad credentials")
			}
			ok()
			return nil
		}), nil
	case sasl.Login:
		return &loginServer{check: func(user, pass string) error {
			if user != smtpUser || pass != smtpPassword {
				return errors.New("bad credentials")
			}
			ok()
			return nil
		}}, nil
	case "CRAM-MD5":
		return &cramServer{challenge: fmt.Sprintf("<%d.kw@localhost>", time.Now().UnixNano()), ok: ok}, nil
	}
	return nil, gosmtp.ErrAuthUnknownMechanism
}

func (s *smtpSession) Mail(from string, _ *gosmtp.MailOptions) error { s.from = from; return nil }
func (s *smtpSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *smtpSession) Reset()        { s.from, s.to = "", nil }
func (s *smtpSession) Logout() error { return nil }

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.p.mu.Lock()
	s.p.froms = append(s.p.froms, s.from)
	s.p.rcpts = append(s.p.rcpts, slices.Clone(s.to))
	s.p.mu.Unlock()
	s.p.box.add(string(b))
	return nil
}

// loginServer is the server side of AUTH LOGIN: two prompts, two answers.
type loginServer struct {
	step  int
	user  string
	check func(user, pass string) error
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if resp != nil {
			l.user = string(resp)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.user = string(resp)
		l.step++
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.check(l.user, string(resp))
	}
}

// cramServer is the server side of AUTH CRAM-MD5 (RFC 2195).
type cramServer struct {
	challenge string
	sent      bool
	ok        func()
}

func (c *cramServer) Next(resp []byte) ([]byte, bool, error) {
	if !c.sent {
		c.sent = true
		return []byte(c.challenge), false, nil
	}
	user, digest, found := strings.Cut(string(resp), " ")
	mac := hmac.New(md5.New, []byte(smtpSecret))
	mac.Write([]byte(c.challenge))
	if !found || user != smtpUser || digest != hex.EncodeToString(mac.Sum(nil)) {
		return nil, true, errors.New("bad CRAM-MD5 response")
	}
	c.ok()
	return nil, true, nil
}

// loopbackCert is a self-signed certificate for 127.0.0.1 and the PEM
// file of it, to trust.
func loopbackCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, file
}
