package notifier

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What one sink makes of an incident's change: its own open for the first
// message it sends, updates only where it can show them, a resolve only
// where it sent something.
func TestDelivery_IncidentViewPerSink(t *testing.T) {
	for _, tc := range []struct {
		name    string
		updates bool
		ref     string
		state   string // of the incident's change
		want    string // the sink's state, "" for nothing sent
	}{
		{"first message of a sink is its open", true, "", IncidentUpdate, IncidentOpen},
		{"later change, a sink that shows updates", true, "C1 1", IncidentUpdate, IncidentUpdate},
		{"later change, a sink that cannot edit", false, "sent", IncidentUpdate, ""},
		{"first message of a sink that cannot edit", false, "", IncidentUpdate, IncidentOpen},
		{"resolve of what the sink sent", false, "sent", IncidentResolved, IncidentResolved},
		{"resolve of what the sink never sent", true, "", IncidentResolved, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newIncidentTracker(time.Minute)
			if tc.ref != "" {
				tr.setRef("id1", "s", tc.ref)
			}
			d := &delivery{name: "s", incidents: tr, updates: tc.updates}
			ev := &Event{Kind: "Pod", Incident: &Incident{ID: "id1", State: tc.state, Seq: 3}}
			view, ref, ok := d.incidentView(t.Context(), ev)
			got := ""
			if ok {
				got = view.Incident.State
				if ref != tc.ref || view.Incident.Seq != 3 {
					t.Errorf("ref %q seq %d, want %q 3", ref, view.Incident.Seq, tc.ref)
				}
			}
			if got != tc.want {
				t.Errorf("state %q, want %q", got, tc.want)
			}
			if ev.Incident.State != tc.state {
				t.Error("the view changed the shared event")
			}
		})
	}
}

type recordingSender struct{ got []*Event }

func (r *recordingSender) send(_ context.Context, ev *Event) error {
	r.got = append(r.got, ev)
	return nil
}

// A sink without incidents sends kubewatch's payload even when incidents
// are on for another sink: the event it sends carries no incident nor
// explanation, and a resolve does not reach it.
func TestDelivery_ASinkWithoutIncidentsSendsKubewatchsPayload(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingSender{}
	f, _ := newFilter(FilterConfig{})
	d := &delivery{name: "plain", sender: rec, filter: f, maxAttempts: 1, log: slog.New(slog.DiscardHandler), m: m, queue: make(chan *Event, 4)}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ev := &Event{Type: Update, Kind: "Pod", Namespace: "ns", Name: "p", Time: at,
		Incident: &Incident{ID: "id1", State: IncidentOpen}, Explanation: &Explanation{Reason: "OOMKilled"}}
	d.deliver(t.Context(), ev)
	if len(rec.got) != 1 || rec.got[0].Incident != nil || rec.got[0].Explanation != nil {
		t.Fatalf("sent %+v, want one event without incident or explanation", rec.got)
	}
	got, err := webhookBody(rec.got[0], rec.got[0].Message(), SinkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := webhookBody(&Event{Type: Update, Kind: "Pod", Namespace: "ns", Name: "p", Time: at}, (&Event{Type: Update, Kind: "Pod", Namespace: "ns", Name: "p"}).Message(), SinkConfig{})
	if string(got) != string(plain) {
		t.Errorf("body %s, want kubewatch's %s", got, plain)
	}
	res := &Event{Resource: "incident:id1", Incident: &Incident{ID: "id1", State: IncidentResolved}, resolve: &resolveRefs{id: "id1", tr: newIncidentTracker(time.Minute)}}
	d.offer(res)
	if len(d.queue) != 0 {
		t.Error("a resolve was queued for a sink without incidents")
	}
}
