package notifier

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// kubewatch's CloudEvent attributes.
const (
	CloudEventType   = "KUBERNETES_TOPOLOGY_CHANGE"
	CloudEventSource = "https://github.com/robusta-dev/kubewatch"
)

// cloudEventData is kubewatch's data of a KUBERNETES_TOPOLOGY_CHANGE
// event. clusterUid is the configured cluster name, else kubewatch's
// placeholder "TODO".
type cloudEventData struct {
	Operation   string         `json:"operation"`
	Kind        string         `json:"kind"`
	ClusterUID  string         `json:"clusterUid"`
	Description string         `json:"description"`
	APIVersion  string         `json:"apiVersion"`
	Obj         map[string]any `json:"obj"`
	OldObj      map[string]any `json:"oldObj"`
	// Incident and Explanation: incident sinks only.
	Incident    *Incident    `json:"incident,omitempty"`
	Explanation *Explanation `json:"explanation,omitempty"`
}

// cloudEventSender sends CloudEvents 1.0 in structured mode (one JSON
// document) over HTTP through the CloudEvents SDK.
type cloudEventSender struct {
	url    string
	logURL string
	client cloudevents.Client
	http   *http.Client
	text   textFunc
	// ids are "<start unix seconds>-<counter>", as kubewatch's.
	start   int64
	counter atomic.Uint64
}

func newCloudEventSender(s SinkConfig, text textFunc, now time.Time) (*cloudEventSender, error) {
	hc, err := httpClient(s)
	if err != nil {
		return nil, err
	}
	p, err := cehttp.New(cehttp.WithClient(*hc))
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	return &cloudEventSender{url: s.URL, logURL: redactURL(s.URL), client: c, http: hc, text: text, start: now.Unix()}, nil
}

// cloudEvent is the CloudEvent for ev.
func (c *cloudEventSender) cloudEvent(ev *Event) (cloudevents.Event, error) {
	text, err := c.text(ev)
	if err != nil {
		return cloudevents.Event{}, err
	}
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("%d-%d", c.start, c.counter.Add(1)))
	e.SetSource(CloudEventSource)
	e.SetType(CloudEventType)
	e.SetTime(ev.Time)
	op := string(ev.Type)
	if ev.Test {
		op = "unknown" // kubewatch's operation for a reason it does not know
	}
	data := cloudEventData{
		Operation: op, Kind: ev.Kind, ClusterUID: orDefault(ev.Cluster, "TODO"), Description: text,
		APIVersion: ev.APIVersion, Obj: ev.Object, OldObj: ev.OldObject,
	}
	if inc := ev.Incident; inc != nil {
		data.Incident, data.Explanation = inc, ev.Explanation
		// As extension attributes too, for routing on the envelope.
		e.SetExtension("incidentid", inc.ID)
		e.SetExtension("incidentseq", inc.Seq)
		e.SetExtension("incidentstate", inc.State)
	}
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return cloudevents.Event{}, fmt.Errorf("encoding the data: %w", err)
	}
	return e, nil
}

func (c *cloudEventSender) send(ctx context.Context, ev *Event) error {
	e, err := c.cloudEvent(ev)
	if err != nil {
		return err
	}
	ctx = cloudevents.WithEncodingStructured(cloudevents.ContextWithTarget(ctx, c.url))
	res := c.client.Send(ctx, e)
	if cloudevents.IsACK(res) {
		return nil
	}
	var hr *cehttp.Result
	if errors.As(res, &hr) && hr.StatusCode != 0 {
		return &sendError{
			status:    hr.StatusCode,
			retryable: hr.StatusCode == http.StatusTooManyRequests || hr.StatusCode >= 500,
			err:       fmt.Errorf("POST %s: %d", c.logURL, hr.StatusCode),
		}
	}
	// Undelivered: the network. Its *url.Error names the URL, whose path
	// may be a credential: keep only the host.
	var ue *url.Error
	if errors.As(res, &ue) {
		ue.URL = c.logURL
	}
	return &sendError{retryable: true, err: fmt.Errorf("POST %s: %w", c.logURL, res)}
}

func (c *cloudEventSender) close() { c.http.CloseIdleConnections() }
