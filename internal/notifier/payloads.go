package notifier

import (
	"encoding/json"
	"time"
)

// The bodies of the HTTP handlers, in kubewatch's shapes. Each takes the
// event and the sink's text (kubewatch's Message() unless the sink has a
// template of its own).

// webhookPayload is kubewatch's webhook body. Cluster, Changes, Object and
// OldObject are this notifier's additions; each is left out unless the
// sink asks for it (or, for Cluster, a cluster name is set), so by default
// the body is kubewatch's byte for byte.
type webhookPayload struct {
	EventMeta eventMeta      `json:"eventmeta"`
	Text      string         `json:"text"`
	Time      string         `json:"time"`
	Cluster   string         `json:"cluster,omitempty"`
	Changes   []string       `json:"changes,omitempty"`
	Object    map[string]any `json:"object,omitempty"`
	OldObject map[string]any `json:"oldObject,omitempty"`
	// Incident and Explanation: incident sinks only.
	Incident    *Incident    `json:"incident,omitempty"`
	Explanation *Explanation `json:"explanation,omitempty"`
}

type eventMeta struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Reason    string `json:"reason"`
}

func webhookBody(ev *Event, text string, s SinkConfig) ([]byte, error) {
	p := webhookPayload{
		EventMeta: eventMeta{Kind: ev.Kind, Name: ev.Name, Namespace: ev.Namespace, Reason: ev.Reason()},
		Text:      text,
		Time:      ev.Time.Format(time.RFC3339Nano),
		Cluster:   ev.Cluster,
	}
	if ev.Incident != nil {
		p.Incident, p.Explanation = ev.Incident, ev.Explanation
	}
	if s.IncludeChanges {
		p.Changes = ev.Changes
	}
	if s.IncludeObject {
		p.Object, p.OldObject = ev.Object, ev.OldObject
	}
	return json.Marshal(p)
}

// slackWebhookPayload is the body of a Slack incoming webhook, with the
// fields kubewatch's slackwebhook handler sets.
type slackWebhookPayload struct {
	Username  string `json:"username,omitempty"`
	IconEmoji string `json:"icon_emoji,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Text      string `json:"text"`
}

func slackWebhookBody(_ *Event, text string, s SinkConfig) ([]byte, error) {
	return json.Marshal(slackWebhookPayload{Username: s.Username, IconEmoji: s.Emoji, Channel: s.Channel, Text: text})
}

// colors per kubewatch status (Normal, Warning, Danger), per service.
var (
	slackColors       = map[string]string{"Normal": "good", "Warning": "warning", "Danger": "danger"}
	msteamsColors     = map[string]string{"Normal": "2DC72D", "Warning": "DEFF22", "Danger": "8C1A1A"}
	adaptiveColors    = map[string]string{"Normal": "Good", "Warning": "Warning", "Danger": "Attention"}
	hexColors         = map[string]string{"Normal": "#00FF00", "Warning": "#FFFF00", "Danger": "#FF0000"}
	hipchatColors     = map[string]string{"Normal": "green", "Warning": "yellow", "Danger": "red"}
	mattermostIconURL = "https://raw.githubusercontent.com/kubernetes/kubernetes/master/logo/logo_with_border.png"
)

// DefaultTitle is the title of slack and msteams messages unless the sink
// sets one (kubewatch's KW_SLACK_TITLE and KW_MSTEAMS_TITLE).
const DefaultTitle = "kubewatch"

// messageCard is the legacy Office 365 connector card kubewatch sends.
type messageCard struct {
	Type       string               `json:"@type"`
	Context    string               `json:"@context"`
	ThemeColor string               `json:"themeColor"`
	Summary    string               `json:"summary"`
	Title      string               `json:"title"`
	Sections   []messageCardSection `json:"sections"`
}

type messageCardSection struct {
	ActivityTitle string            `json:"activityTitle"`
	Facts         []messageCardFact `json:"facts"`
	Markdown      bool              `json:"markdown"`
}

type messageCardFact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func messageCardBody(ev *Event, text string, s SinkConfig) ([]byte, error) {
	title := orDefault(s.Title, DefaultTitle)
	return json.Marshal(messageCard{
		Type: "MessageCard", Context: "http://schema.org/extensions",
		ThemeColor: msteamsColors[ev.Status()],
		Summary:    title + " notification received",
		Title:      title,
		Sections:   []messageCardSection{{ActivityTitle: text, Markdown: true}},
	})
}

// adaptiveMessage is what a Teams Workflows webhook ("Post to a channel
// when a webhook request is received") takes: a message with one Adaptive
// Card attachment.
type adaptiveMessage struct {
	Type        string               `json:"type"`
	Attachments []adaptiveAttachment `json:"attachments"`
}

type adaptiveAttachment struct {
	ContentType string       `json:"contentType"`
	ContentURL  *string      `json:"contentUrl"`
	Content     adaptiveCard `json:"content"`
}

type adaptiveCard struct {
	Schema  string              `json:"$schema"`
	Type    string              `json:"type"`
	Version string              `json:"version"`
	Body    []adaptiveTextBlock `json:"body"`
}

type adaptiveTextBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Weight string `json:"weight,omitempty"`
	Size   string `json:"size,omitempty"`
	Color  string `json:"color,omitempty"`
	Wrap   bool   `json:"wrap,omitempty"`
}

// AdaptiveCardContentType is the attachment content type of an Adaptive
// Card.
const AdaptiveCardContentType = "application/vnd.microsoft.card.adaptive"

func adaptiveCardBody(ev *Event, text string, s SinkConfig) ([]byte, error) {
	return json.Marshal(adaptiveMessage{
		Type: "message",
		Attachments: []adaptiveAttachment{{
			ContentType: AdaptiveCardContentType,
			Content: adaptiveCard{
				Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.4",
				Body: []adaptiveTextBlock{
					{Type: "TextBlock", Text: orDefault(s.Title, DefaultTitle), Weight: "Bolder", Size: "Medium", Color: adaptiveColors[ev.Status()]},
					{Type: "TextBlock", Text: text, Wrap: true},
				},
			},
		}},
	})
}

// mattermostPayload is kubewatch's Mattermost incoming-webhook body.
type mattermostPayload struct {
	Channel     string                 `json:"channel"`
	Username    string                 `json:"username"`
	IconURL     string                 `json:"icon_url"`
	Text        string                 `json:"text"`
	Attachments []mattermostAttachment `json:"attachments"`
}

type mattermostAttachment struct {
	Title string `json:"title"`
	Color string `json:"color"`
}

func mattermostBody(ev *Event, text string, s SinkConfig) ([]byte, error) {
	return json.Marshal(mattermostPayload{
		Channel: s.Channel, Username: s.Username, IconURL: mattermostIconURL,
		Attachments: []mattermostAttachment{{Title: text, Color: hexColors[ev.Status()]}},
	})
}

// flockPayload is kubewatch's Flock incoming-webhook body.
type flockPayload struct {
	Notification string            `json:"notification"`
	Text         string            `json:"text"`
	Attachments  []flockAttachment `json:"attachments"`
}

type flockAttachment struct {
	Title string     `json:"title"`
	Color string     `json:"color"`
	Views flockViews `json:"views"`
}

type flockViews struct {
	Flockml string `json:"flockml"`
}

func flockBody(ev *Event, text string, _ SinkConfig) ([]byte, error) {
	return json.Marshal(flockPayload{
		Notification: "Kubewatch Alert", Text: "Kubewatch Alert",
		Attachments: []flockAttachment{{Title: text, Color: hexColors[ev.Status()]}},
	})
}

// larkPayload is a Lark (Feishu) custom-bot text message.
type larkPayload struct {
	MsgType string      `json:"msg_type"`
	Content larkContent `json:"content"`
}

type larkContent struct {
	Text string `json:"text"`
}

func larkBody(_ *Event, text string, _ SinkConfig) ([]byte, error) {
	return json.Marshal(larkPayload{MsgType: "text", Content: larkContent{Text: text}})
}

// hipchatNotification is a HipChat (or API-compatible) room notification.
type hipchatNotification struct {
	Color   string `json:"color,omitempty"`
	Message string `json:"message"`
	Notify  bool   `json:"notify"`
	From    string `json:"from"`
}

func hipchatBody(ev *Event, text string, _ SinkConfig) ([]byte, error) {
	return json.Marshal(hipchatNotification{Color: hipchatColors[ev.Status()], Message: text, Notify: true, From: "kubewatch"})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
