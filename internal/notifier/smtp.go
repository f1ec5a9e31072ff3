package notifier

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"strconv"
	"strings"

	mail "github.com/wneessen/go-mail"
	mailsmtp "github.com/wneessen/go-mail/smtp"
)

// DefaultSubject is kubewatch's mail subject.
const DefaultSubject = "Kubewatch notification"

// smtpSender mails each event through go-mail: implicit TLS on port 465
// (or with ssl), STARTTLS when requireTLS (failing if the server does not
// offer it), AUTH chosen from what the server offers, as kubewatch does.
type smtpSender struct {
	cfg      SMTPConfig
	host     string
	port     int
	implicit bool
	sink     SinkConfig
	text     textFunc
}

func newSMTPSender(s SinkConfig, text textFunc) (*smtpSender, error) {
	host, portStr, err := net.SplitHostPort(s.SMTP.Smarthost)
	if err != nil {
		return nil, fmt.Errorf("sink %s: smarthost: %w", s.Name, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("sink %s: smarthost: port %q is not a port number", s.Name, portStr)
	}
	if _, err := tlsConfig(s); err != nil {
		return nil, err
	}
	return &smtpSender{cfg: s.SMTP, host: host, port: port, implicit: port == 465 || s.SMTP.SSL, sink: s, text: text}, nil
}

// message builds the mail: kubewatch's headers (Subject, To, From, then
// the custom ones, Q-encoded where needed) and a multipart/alternative
// body whose text/plain part is the sink's text.
func (m *smtpSender) message(ev *Event) (*mail.Msg, error) {
	text, err := m.text(ev)
	if err != nil {
		return nil, err
	}
	msg := mail.NewMsg(mail.WithEncoding(mail.EncodingQP))
	if err := msg.From(m.cfg.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	var to []string
	for _, a := range strings.Split(m.cfg.To, ",") {
		if a = strings.TrimSpace(a); a != "" {
			to = append(to, a)
		}
	}
	if err := msg.To(to...); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	msg.Subject(orDefault(m.cfg.Subject, DefaultSubject))
	for k, v := range m.cfg.Headers {
		msg.SetGenHeader(mail.Header(k), v)
	}
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(mail.TypeTextPlain, text)
	msg.AddAlternativeString(mail.TypeTextHTML, "<pre>"+html.EscapeString(text)+"</pre>")
	return msg, nil
}

func (m *smtpSender) client() (*mail.Client, error) {
	opts := []mail.Option{mail.WithPort(m.port), mail.WithTimeout(requestTimeout)}
	switch {
	case m.implicit:
		opts = append(opts, mail.WithSSL())
	case m.cfg.RequireTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	default:
		// As kubewatch: no STARTTLS unless required. PLAIN and LOGIN
		// then refuse to send a password in the clear (but to
		// localhost).
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	}
	if m.cfg.Hello != "" {
		opts = append(opts, mail.WithHELO(m.cfg.Hello))
	}
	if tc, _ := tlsConfig(m.sink); tc != nil {
		tc.ServerName = m.host
		opts = append(opts, mail.WithTLSConfig(tc))
	}
	if m.cfg.Auth.Username != "" {
		opts = append(opts, mail.WithSMTPAuthCustom(&chooseAuth{cfg: m.cfg.Auth, host: m.host}))
	}
	return mail.NewClient(m.host, opts...)
}

func (m *smtpSender) send(ctx context.Context, ev *Event) error {
	msg, err := m.message(ev)
	if err != nil {
		return err
	}
	c, err := m.client()
	if err != nil {
		return err
	}
	err = c.DialAndSendWithContext(ctx, msg)
	if err == nil {
		return nil
	}
	// A permanent SMTP reply (5xx) stays one; a temporary one (4xx), a
	// TLS or network failure may pass next time.
	var noAuth *noAuthError
	if errors.As(err, &noAuth) {
		return &sendError{err: err}
	}
	var se *mail.SendError
	if errors.As(err, &se) && se.ErrorCode() >= 500 {
		return &sendError{status: se.ErrorCode(), err: err}
	}
	return &sendError{retryable: true, err: err}
}

// noAuthError: the server offers no mechanism the configured credentials
// can use.
type noAuthError struct{ offered []string }

func (e *noAuthError) Error() string {
	return fmt.Sprintf("smtp: no usable AUTH mechanism among %q (CRAM-MD5 needs auth.secret, PLAIN and LOGIN auth.password)", e.offered)
}

// chooseAuth picks, in the server's order, the first mechanism of
// CRAM-MD5 (with secret), PLAIN (password, identity) and LOGIN (password),
// as kubewatch does, and then speaks it.
type chooseAuth struct {
	cfg    SMTPAuth
	host   string
	chosen mailsmtp.Auth
}

func (a *chooseAuth) Start(server *mailsmtp.ServerInfo) (string, []byte, error) {
	a.chosen = nil
	for _, mech := range server.Auth {
		switch strings.ToUpper(mech) {
		case "CRAM-MD5":
			if a.cfg.Secret != "" {
				a.chosen = mailsmtp.CRAMMD5Auth(a.cfg.Username, a.cfg.Secret)
			}
		case "PLAIN":
			if a.cfg.Password != "" {
				a.chosen = mailsmtp.PlainAuth(a.cfg.Identity, a.cfg.Username, a.cfg.Password, a.host, false)
			}
		case "LOGIN":
			if a.cfg.Password != "" {
				a.chosen = mailsmtp.LoginAuth(a.cfg.Username, a.cfg.Password, a.host, false)
			}
		}
		if a.chosen != nil {
			return a.chosen.Start(server)
		}
	}
	return "", nil, &noAuthError{offered: server.Auth}
}

func (a *chooseAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if a.chosen == nil {
		return nil, errors.New("smtp: AUTH not started")
	}
	return a.chosen.Next(fromServer, more)
}
