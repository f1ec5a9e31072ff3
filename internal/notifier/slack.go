package notifier

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/slack-go/slack"
)

// DefaultSlackAPIURL is Slack's Web API, unless a slack sink sets apiurl
// (a Slack-compatible server, or a test server).
const DefaultSlackAPIURL = "https://slack.com/api/"

// slackSender posts kubewatch's message with a bot token through Slack's
// chat.postMessage: one attachment with one field (the title, the text),
// coloured by status, as the bot user.
type slackSender struct {
	api     *slack.Client
	client  *http.Client
	channel string
	title   string
	text    textFunc
}

func newSlackSender(s SinkConfig, text textFunc) (*slackSender, error) {
	client, err := httpClient(s)
	if err != nil {
		return nil, err
	}
	apiURL := orDefault(s.URL, DefaultSlackAPIURL)
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	return &slackSender{
		api:     slack.New(s.Token, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(client)),
		client:  client,
		channel: s.Channel,
		title:   orDefault(s.Title, DefaultTitle),
		text:    text,
	}, nil
}

func (s *slackSender) send(ctx context.Context, ev *Event) error {
	text, err := s.text(ev)
	if err != nil {
		return err
	}
	att := slack.Attachment{
		Color:      slackColors[ev.Status()],
		Fields:     []slack.AttachmentField{{Title: s.title, Value: text}},
		MarkdownIn: []string{"fields"},
	}
	_, _, err = s.api.PostMessageContext(ctx, s.channel, slack.MsgOptionAttachments(att), slack.MsgOptionAsUser(true))
	return slackError(err)
}

// incidentColors are the attachment colours by incident severity.
var incidentColors = map[string]string{SeverityInfo: "#439FE0", SeverityWarning: "warning", SeverityFailed: "danger"}

// sendIncident posts an incident's first message and updates it in place
// (chat.update) with each later change; the resolve updates it once more
// and replies in its thread, so the channel sees one message per
// incident. ref is "channel ts" of the first message.
func (s *slackSender) sendIncident(ctx context.Context, ev *Event, ref string) (string, error) {
	text, err := s.text(ev)
	if err != nil {
		return "", err
	}
	color := incidentColors[ev.Incident.Severity]
	if ev.Incident.State == IncidentResolved {
		color = "good"
	}
	att := slack.MsgOptionAttachments(slack.Attachment{
		Color:      color,
		Fields:     []slack.AttachmentField{{Title: s.title, Value: text}},
		MarkdownIn: []string{"fields"},
	})
	channel, ts, found := strings.Cut(ref, " ")
	if !found {
		channel, ts, err = s.api.PostMessageContext(ctx, s.channel, att, slack.MsgOptionAsUser(true))
		if err != nil {
			return "", slackError(err)
		}
		return channel + " " + ts, nil
	}
	if _, _, _, err := s.api.UpdateMessageContext(ctx, channel, ts, att); err != nil {
		return ref, slackError(err)
	}
	if ev.Incident.State == IncidentResolved {
		_, _, err = s.api.PostMessageContext(ctx, channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(ts), slack.MsgOptionAsUser(true))
		return ref, slackError(err)
	}
	return ref, nil
}

// slackError classifies a Slack API error (nil for nil).
func slackError(err error) error {
	if err == nil {
		return nil
	}
	// Slack's own refusals (channel_not_found, invalid_auth, ...) come
	// back with HTTP 200 and stay refusals; a rate limit, a 5xx or the
	// network may pass next time.
	var (
		rl   *slack.RateLimitedError
		sc   slack.StatusCodeError
		resp slack.SlackErrorResponse
	)
	switch {
	case errors.As(err, &rl):
		return &sendError{retryable: true, status: http.StatusTooManyRequests, retryAfter: rl.RetryAfter, err: err}
	case errors.As(err, &sc):
		return &sendError{retryable: sc.Code >= 500 || sc.Code == http.StatusTooManyRequests, status: sc.Code, err: err}
	case errors.As(err, &resp):
		return &sendError{err: err}
	}
	return &sendError{retryable: true, err: err}
}

func (s *slackSender) close() { s.client.CloseIdleConnections() }
