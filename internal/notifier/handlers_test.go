package notifier

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/slack-go/slack"
)

// sendOne validates sc as the only sink of a config, builds its sender
// and sends ev once.
func sendOne(t *testing.T, sc SinkConfig, ev *Event) error {
	t.Helper()
	cfg := Config{Resources: []string{"pod"}, Sinks: []SinkConfig{sc}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sc = cfg.Sinks[0]
	text, err := newTextFunc(sc.Name, sc.Template)
	if err != nil {
		t.Fatal(err)
	}
	s, closer, err := newSender(sc, text, io.Discard, &sync.Mutex{}, testTime)
	if err != nil {
		t.Fatal(err)
	}
	if closer != nil {
		defer closer()
	}
	return s.send(context.Background(), ev)
}

// decode parses a JSON body into generic values.
func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return m
}

func wantEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

const updateText = "A `ConfigMap` in namespace `web` has been `Updated`:\n`settings`"

func TestMSTeams_SendsKubewatchsMessageCardOrAnAdaptiveCard(t *testing.T) {
	peer := newJSONPeer(t)
	if err := sendOne(t, SinkConfig{Type: SinkMSTeams, URL: peer.URL + "/legacy"}, updateEvent()); err != nil {
		t.Fatal(err)
	}
	card := decode(t, peer.box("/legacy").all()[0])
	wantEqual(t, "@type", card["@type"], "MessageCard")
	wantEqual(t, "@context", card["@context"], "http://schema.org/extensions")
	wantEqual(t, "themeColor", card["themeColor"], "DEFF22")
	wantEqual(t, "summary", card["summary"], "kubewatch notification received")
	wantEqual(t, "title", card["title"], "kubewatch")
	wantEqual(t, "sections", card["sections"], []any{map[string]any{"activityTitle": updateText, "facts": nil, "markdown": true}})
	wantEqual(t, "keys", len(card), 6)

	if err := sendOne(t, SinkConfig{Type: SinkMSTeams, URL: peer.URL + "/workflow", Card: CardAdaptive, Title: "prod watch"}, createEvent()); err != nil {
		t.Fatal(err)
	}
	msg := decode(t, peer.box("/workflow").all()[0])
	wantEqual(t, "type", msg["type"], "message")
	atts := msg["attachments"].([]any)
	wantEqual(t, "attachments", len(atts), 1)
	att := atts[0].(map[string]any)
	wantEqual(t, "contentType", att["contentType"], "application/vnd.microsoft.card.adaptive")
	wantEqual(t, "contentUrl", att["contentUrl"], nil)
	content := att["content"].(map[string]any)
	wantEqual(t, "content.type", content["type"], "AdaptiveCard")
	wantEqual(t, "content.version", content["version"], "1.4")
	wantEqual(t, "content.$schema", content["$schema"], "http://adaptivecards.io/schemas/adaptive-card.json")
	wantEqual(t, "content.body", content["body"], []any{
		map[string]any{"type": "TextBlock", "text": "prod watch", "weight": "Bolder", "size": "Medium", "color": "Good"},
		map[string]any{"type": "TextBlock", "text": createEvent().Message(), "wrap": true},
	})

	// Teams answers a refused card with a 4xx: not retried.
	peer.mu.Lock()
	peer.status = 400
	peer.mu.Unlock()
	if err := sendOne(t, SinkConfig{Type: SinkMSTeams, URL: peer.URL + "/legacy"}, updateEvent()); err == nil || isRetryable(err) {
		t.Errorf("400: err %v, want a refusal", err)
	}
}

func TestMattermostFlockLarkHipchat_SendKubewatchsPayloads(t *testing.T) {
	peer := newJSONPeer(t)
	del := createEvent()
	del.Type = Delete
	delText := "A `Pod` in namespace `default` has been `Deleted`:\n`nginx-6d4cf56db6-abcde`"

	if err := sendOne(t, SinkConfig{Type: SinkMattermost, URL: peer.URL + "/mm", Channel: "ops", Username: "kw"}, del); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "mattermost", decode(t, peer.box("/mm").all()[0]), map[string]any{
		"channel": "ops", "username": "kw", "text": "",
		"icon_url":    "https://raw.githubusercontent.com/kubernetes/kubernetes/master/logo/logo_with_border.png",
		"attachments": []any{map[string]any{"title": delText, "color": "#FF0000"}},
	})

	if err := sendOne(t, SinkConfig{Type: SinkFlock, URL: peer.URL + "/flock"}, updateEvent()); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "flock", decode(t, peer.box("/flock").all()[0]), map[string]any{
		"notification": "Kubewatch Alert", "text": "Kubewatch Alert",
		"attachments": []any{map[string]any{"title": updateText, "color": "#FFFF00", "views": map[string]any{"flockml": ""}}},
	})

	if err := sendOne(t, SinkConfig{Type: SinkLark, URL: peer.URL + "/lark"}, updateEvent()); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "lark", decode(t, peer.box("/lark").all()[0]), map[string]any{
		"msg_type": "text", "content": map[string]any{"text": updateText},
	})

	// HipChat's room notification API under a custom base URL, the room
	// name escaped into the path, the token as a bearer.
	if err := sendOne(t, SinkConfig{Type: SinkHipchat, URL: peer.URL + "/v2", Room: "k8s alerts", Token: "hc-token"}, createEvent()); err != nil {
		t.Fatal(err)
	}
	box := peer.box("/v2/room/k8s alerts/notification")
	if len(box.all()) != 1 {
		t.Fatalf("hipchat: received at %v, want /v2/room/k8s%%20alerts/notification", peer.boxes)
	}
	wantEqual(t, "hipchat", decode(t, box.all()[0]), map[string]any{
		"message": createEvent().Message(), "notify": true, "from": "kubewatch", "color": "green",
	})
	peer.mu.Lock()
	auth := peer.headers["/v2/room/k8s alerts/notification"][0].Get("Authorization")
	peer.mu.Unlock()
	wantEqual(t, "hipchat Authorization", auth, "Bearer hc-token")
}

func TestSlack_ChatPostMessageCarriesOneColouredAttachment(t *testing.T) {
	peer := newSlackPeer(t)
	sc := SinkConfig{Type: SinkSlack, Token: "xoxb-test", Channel: "C0123", URL: peer.GetAPIURL()}
	for _, ev := range []*Event{createEvent(), updateEvent()} {
		if err := sendOne(t, sc, ev); err != nil {
			t.Fatalf("PostMessage: %v", err)
		}
	}
	sc.Title = "prod"
	del := updateEvent()
	del.Type = Delete
	if err := sendOne(t, sc, del); err != nil {
		t.Fatal(err)
	}
	peer.box.waitFor(t, "slack", `"title":"prod"`)
	msgs := peer.messages(t)
	if len(msgs) != 3 {
		t.Fatalf("slack got %d messages, want 3", len(msgs))
	}
	for i, want := range []struct{ color, title, text string }{
		{"good", "kubewatch", createEvent().Message()},
		{"warning", "kubewatch", updateText},
		{"danger", "prod", strings.Replace(updateText, "Updated", "Deleted", 1)},
	} {
		m := msgs[i]
		wantEqual(t, "channel", m.Channel, "C0123")
		// as_user: the bot posts as itself (slacktest's bot user).
		wantEqual(t, "user", m.User, peer.BotID)
		if len(m.Attachments) != 1 {
			t.Fatalf("message %d: %d attachments, want 1", i, len(m.Attachments))
		}
		a := m.Attachments[0]
		wantEqual(t, "color", a.Color, want.color)
		wantEqual(t, "mrkdwn_in", a.MarkdownIn, []string{"fields"})
		wantEqual(t, "fields", a.Fields, []slack.AttachmentField{{Title: want.title, Value: want.text}})
	}

	// Slack's own refusal (a 200 with ok:false) is not retried.
	refusing := SinkConfig{Type: SinkSlack, Token: "xoxb-test", Channel: "C0123", URL: peer.GetAPIURL() + "nope/"}
	if err := sendOne(t, refusing, createEvent()); err == nil || isRetryable(err) {
		t.Errorf("unknown API path: err %v, want a refusal", err)
	}
}

func TestCloudEvent_TheSDKsReceiverGetsKubewatchsStructuredEvent(t *testing.T) {
	peer := newCloudEventPeer(t)
	ev := updateEvent()
	ev.OldObject = map[string]any{"kind": "ConfigMap", "data": map[string]any{"k": "v1"}}
	ev.Cluster = "prod"
	if err := sendOne(t, SinkConfig{Type: SinkCloudEvent, URL: peer.URL}, ev); err != nil {
		t.Fatal(err)
	}
	if err := sendOne(t, SinkConfig{Type: SinkCloudEvent, URL: peer.URL}, createEvent()); err != nil {
		t.Fatal(err)
	}
	evs := peer.events()
	if len(evs) != 2 {
		t.Fatalf("receiver got %d events, want 2", len(evs))
	}
	e := evs[0]
	wantEqual(t, "specversion", e.SpecVersion(), "1.0")
	wantEqual(t, "type", e.Type(), "KUBERNETES_TOPOLOGY_CHANGE")
	wantEqual(t, "source", e.Source(), "https://github.com/robusta-dev/kubewatch")
	wantEqual(t, "id", e.ID(), "1767268800-1")
	wantEqual(t, "time", e.Time().UTC(), testTime)
	wantEqual(t, "datacontenttype", e.DataContentType(), "application/json")
	var data map[string]any
	if err := e.DataAs(&data); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "data", data, map[string]any{
		"operation": "update", "kind": "ConfigMap", "clusterUid": "prod", "description": "`prod` - " + updateText, "apiVersion": "v1",
		"obj":    map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": "web"}, "data": map[string]any{"k": "v2"}},
		"oldObj": map[string]any{"kind": "ConfigMap", "data": map[string]any{"k": "v1"}},
	})
	if err := evs[1].DataAs(&data); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "second id", evs[1].ID(), "1767268800-1") // a sender of its own: a new counter
	wantEqual(t, "create: operation, clusterUid, oldObj", []any{data["operation"], data["clusterUid"], data["oldObj"]}, []any{"create", "TODO", nil})
}

// readMail parses a delivered mail as a mail client would: its headers
// and the parts of its multipart/alternative body.
func readMail(t *testing.T, raw string) (mail.Header, map[string]string) {
	t.Helper()
	m, err := mail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("%v:\n%s", err, raw)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q (%v), want multipart/alternative", m.Header.Get("Content-Type"), err)
	}
	parts := map[string]string{}
	r := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := r.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts[ct] = string(b)
	}
	return m.Header, parts
}

func TestSMTP_StartTLSAndAuthChosenFromWhatTheServerOffers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		offered  []string
		auth     SMTPAuth
		wantMech string
	}{
		{"plain", []string{"PLAIN"}, SMTPAuth{Username: smtpUser, Password: smtpPassword}, "PLAIN"},
		{"login", []string{"LOGIN"}, SMTPAuth{Username: smtpUser, Password: smtpPassword}, "LOGIN"},
		{"cram-md5 first in the server's order", []string{"CRAM-MD5", "PLAIN", "LOGIN"}, SMTPAuth{Username: smtpUser, Password: smtpPassword, Secret: smtpSecret}, "CRAM-MD5"},
		{"cram-md5 without a secret falls to the next", []string{"CRAM-MD5", "LOGIN", "PLAIN"}, SMTPAuth{Username: smtpUser, Password: smtpPassword}, "LOGIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := newSMTPPeer(t, false, tc.offered...)
			sc := SinkConfig{Type: SinkSMTP, Cert: peer.CAFile, SMTP: SMTPConfig{
				To: "ops@example.com, oncall@example.com", From: "kubewatch@example.com", Smarthost: peer.Addr,
				RequireTLS: true, Hello: "notifier.example.com", Auth: tc.auth,
				Headers: map[string]string{"X-Cluster": "prod", "X-Team": "Plattform-Überwachung"},
			}}
			if err := sendOne(t, sc, updateEvent()); err != nil {
				t.Fatalf("send: %v", err)
			}
			peer.mu.Lock()
			authed, froms, rcpts, helos := peer.authed, peer.froms, peer.rcpts, peer.helos
			peer.mu.Unlock()
			wantEqual(t, "AUTH", authed, []string{tc.wantMech})
			wantEqual(t, "MAIL FROM", froms, []string{"kubewatch@example.com"})
			wantEqual(t, "RCPT TO", rcpts, [][]string{{"ops@example.com", "oncall@example.com"}})
			wantEqual(t, "EHLO", helos[len(helos)-1], "notifier.example.com")
			h, parts := readMail(t, peer.box.all()[0])
			wantEqual(t, "Subject", h.Get("Subject"), "Kubewatch notification")
			wantEqual(t, "From", h.Get("From"), "<kubewatch@example.com>")
			if to := h.Get("To"); !strings.Contains(to, "ops@example.com") || !strings.Contains(to, "oncall@example.com") {
				t.Errorf("To = %q", to)
			}
			wantEqual(t, "X-Cluster", h.Get("X-Cluster"), "prod")
			team, err := new(mime.WordDecoder).DecodeHeader(h.Get("X-Team"))
			wantEqual(t, "X-Team (decoded)", team, "Plattform-Überwachung")
			if err != nil || h.Get("X-Team") == team {
				t.Errorf("X-Team = %q (%v), want it Q-encoded", h.Get("X-Team"), err)
			}
			if h.Get("Date") == "" || h.Get("Message-Id") == "" {
				t.Errorf("Date %q, Message-Id %q: want both", h.Get("Date"), h.Get("Message-Id"))
			}
			// Mail lines end in CRLF.
			wantEqual(t, "text/plain part", parts["text/plain"], strings.ReplaceAll(updateText, "\n", "\r\n"))
		})
	}
}

func TestSMTP_ImplicitTLSAndTheFailuresThatAreNotRetried(t *testing.T) {
	tlsPeer := newSMTPPeer(t, true, "PLAIN")
	sc := SinkConfig{Type: SinkSMTP, Cert: tlsPeer.CAFile, SMTP: SMTPConfig{
		To: "ops@example.com", From: "kw@example.com", Smarthost: tlsPeer.Addr, SSL: true, Subject: "k8s",
		Auth: SMTPAuth{Username: smtpUser, Password: smtpPassword},
	}}
	if err := sendOne(t, sc, createEvent()); err != nil {
		t.Fatalf("implicit TLS: %v", err)
	}
	h, parts := readMail(t, tlsPeer.box.all()[0])
	wantEqual(t, "Subject", h.Get("Subject"), "k8s")
	wantEqual(t, "text/plain part", parts["text/plain"], strings.ReplaceAll(createEvent().Message(), "\n", "\r\n"))

	// An untrusted certificate fails.
	untrusted := sc
	untrusted.Cert = ""
	if err := sendOne(t, untrusted, createEvent()); err == nil {
		t.Error("implicit TLS to an untrusted certificate succeeded")
	}
	// Credentials no offered mechanism can use: refused, not retried.
	peer := newSMTPPeer(t, false, "CRAM-MD5")
	noSecret := SinkConfig{Type: SinkSMTP, Cert: peer.CAFile, SMTP: SMTPConfig{
		To: "ops@example.com", From: "kw@example.com", Smarthost: peer.Addr, RequireTLS: true,
		Auth: SMTPAuth{Username: smtpUser, Password: smtpPassword},
	}}
	if err := sendOne(t, noSecret, createEvent()); err == nil || isRetryable(err) || !strings.Contains(err.Error(), "no usable AUTH mechanism") {
		t.Errorf("CRAM-MD5 only, no secret: err %v, want a refusal naming the mechanisms", err)
	}
	if n := len(peer.box.all()); n != 0 {
		t.Errorf("%d mails delivered without authenticating", n)
	}
}
