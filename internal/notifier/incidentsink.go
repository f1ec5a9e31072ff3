package notifier

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The shell of incidents: what the source adds to an event, the resolves
// the notifier's ticker sends, and what each incident sink makes of them.

// resolveRefs counts the sinks a resolve is on its way to; the tracker
// forgets the incident once all are through with it.
type resolveRefs struct {
	n         atomic.Int32
	abandoned atomic.Bool
	id        string
	tr        *incidentTracker
}

func (r *resolveRefs) finish(delivered bool) {
	if !delivered {
		r.abandoned.Store(true)
	}
	if r.n.Add(-1) == 0 {
		r.tr.done(r.id, !r.abandoned.Load())
	}
}

// lazyLogs fetches a Pod's failed container's previous log once, for
// the first sink that sends the event.
type lazyLogs struct {
	once        sync.Once
	f           *logFetcher
	ns, name, c string
	lines       []string
	why         string
}

func (l *lazyLogs) get(ctx context.Context) ([]string, string) {
	l.once.Do(func() {
		if l.f == nil {
			l.why = "logs unavailable: the notifier has no API access for pods/log"
			return
		}
		lines, err := l.f.fetch(ctx, l.ns, l.name, l.c)
		switch {
		case err != nil:
			l.why = "logs unavailable: " + err.Error()
		case len(lines) == 0:
			l.why = "logs unavailable: the previous log of container " + l.c + " is empty"
		default:
			l.lines = lines
		}
	})
	return l.lines, l.why
}

// incidentCapable sinks update an incident's message in place (slack) or
// carry its id, sequence and state (webhook, cloudevent, log): they are
// sent every change. The others are sent the open and the resolve only.
func incidentUpdates(typ string) bool {
	switch typ {
	case SinkSlack, SinkWebhook, SinkCloudEvent, SinkLog:
		return true
	}
	return false
}

// incidentSender is a sender that updates an incident's message in place:
// ref is what it returned for the incident's first message ("" if none);
// it returns the ref to keep.
type incidentSender interface {
	sendIncident(ctx context.Context, ev *Event, ref string) (string, error)
}

// incidentView is ev as incident sink d sees it: its own state of the
// incident (open for the first message it gets of it), the explanation
// with the logs if asked; ok false when d sends nothing of it.
func (d *delivery) incidentView(ctx context.Context, ev *Event) (view *Event, ref string, ok bool) {
	inc := *ev.Incident
	ref = d.incidents.ref(inc.ID, d.name)
	switch {
	case inc.State == IncidentResolved:
		if ref == "" {
			return nil, "", false // the sink never heard of it
		}
	case ref == "":
		inc.State = IncidentOpen
	default:
		inc.State = IncidentUpdate
		if !d.updates {
			return nil, "", false
		}
	}
	cp := *ev
	cp.tr, cp.pend, cp.resolve = nil, nil, nil
	cp.Incident = &inc
	if ev.Explanation != nil && ev.logs != nil && inc.State != IncidentResolved {
		x := *ev.Explanation
		x.Logs, x.LogsUnavailable = ev.logs.get(ctx)
		cp.Explanation = &x
	}
	return &cp, ref, true
}

// sendIncident delivers an incident sink's view of ev, keeping the
// sink's ref of the incident after its first message.
func (d *delivery) sendIncident(ctx context.Context, view *Event, ref string) error {
	var err error
	newRef := "sent"
	if is, ok := d.sender.(incidentSender); ok {
		newRef, err = is.sendIncident(ctx, view, ref)
	} else {
		err = d.sender.send(ctx, view)
	}
	if err == nil && ref == "" && view.Incident.State != IncidentResolved {
		d.incidents.setRef(view.Incident.ID, d.name, newRef)
	}
	return err
}

// incidentText is an incident sink's text, unless it has a template:
//
//	[OPEN] Pod `default/web-1`: CrashLoopBackOff
//	container app: exit code 137 (OOMKilled), 3 restarts; owner Deployment/web
//	back-off 10s restarting failed container
//	last change: A `Pod` in namespace `default` has been `Updated`: `web-1`
//	incident 1x2y3z #4: 4 changes, 1 flap, open since 12:01:02Z
func incidentText(ev *Event) string {
	inc := ev.Incident
	var b strings.Builder
	if ev.Cluster != "" {
		fmt.Fprintf(&b, "`%s` - ", ev.Cluster)
	}
	fmt.Fprintf(&b, "[%s] %s `%s`", strings.ToUpper(inc.State), inc.Kind, path(inc.Namespace, inc.Name))
	if inc.State == IncidentResolved {
		fmt.Fprintf(&b, " resolved after %s: %s\nincident %s #%d", ev.Time.Sub(inc.Opened).Round(time.Second), counts(inc), inc.ID, inc.Seq)
		return b.String()
	}
	x := ev.Explanation
	if x != nil && x.Reason != "" {
		fmt.Fprintf(&b, ": %s", x.Reason)
	}
	b.WriteString("\n")
	if x != nil {
		var facts []string
		if x.Container != "" {
			f := "container " + x.Container
			if x.ExitCode != nil {
				f += fmt.Sprintf(": exit code %d", *x.ExitCode)
				if x.TerminationReason != "" {
					f += " (" + x.TerminationReason + ")"
				}
			}
			facts = append(facts, f+fmt.Sprintf(", %d restarts", x.Restarts))
		}
		if x.Replicas != "" {
			facts = append(facts, "replicas ready "+x.Replicas)
		}
		if x.Owner != "" {
			facts = append(facts, "owner "+x.Owner)
		}
		if len(facts) > 0 {
			b.WriteString(strings.Join(facts, "; ") + "\n")
		}
		if x.Message != "" {
			b.WriteString(x.Message + "\n")
		}
	}
	if inc.Kind != ev.Kind || inc.Name != ev.Name {
		fmt.Fprintf(&b, "last change: %s\n", (&Event{Kind: ev.Kind, Namespace: ev.Namespace, Name: ev.Name, Type: ev.Type}).Message())
	} else {
		fmt.Fprintf(&b, "last change: %s\n", ev.Reason())
	}
	if x != nil && len(x.Logs) > 0 {
		fmt.Fprintf(&b, "last %d log lines of %s (previous run):\n```\n%s\n```\n", len(x.Logs), x.Container, strings.Join(x.Logs, "\n"))
	} else if x != nil && x.LogsUnavailable != "" {
		b.WriteString(x.LogsUnavailable + "\n")
	}
	fmt.Fprintf(&b, "incident %s #%d: %s, open since %s", inc.ID, inc.Seq, counts(inc), inc.Opened.UTC().Format(time.RFC3339))
	return b.String()
}

func counts(inc *Incident) string {
	s := fmt.Sprintf("%d changes", inc.Changes)
	if inc.Changes == 1 {
		s = "1 change"
	}
	switch inc.Flaps {
	case 0:
	case 1:
		s += ", 1 flap"
	default:
		s += fmt.Sprintf(", %d flaps", inc.Flaps)
	}
	return s
}

func path(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// incidentTextFunc is the text of an incident sink: its template if it has
// one, else incidentText.
func incidentTextFunc(name, src string) (textFunc, error) {
	if src != "" {
		return newTextFunc(name, src)
	}
	return func(ev *Event) (string, error) {
		if ev.Incident == nil {
			return ev.Message(), nil
		}
		return incidentText(ev), nil
	}, nil
}

// observe puts a change into its incident (source side): the subject is
// the object, or with grouping by owner its controlling workload.
func (n *Notifier) observe(ev *Event) {
	if n.incidents == nil || ev.Explanation == nil {
		return
	}
	kind, ns, name := ev.Kind, ev.Namespace, ev.Name
	if owner := ev.Explanation.Owner; n.cfg.Incidents.GroupByOwner && owner != "" {
		kind, name, _ = strings.Cut(owner, "/")
	}
	inc := n.incidents.observe(incidentChange{
		Kind: kind, Namespace: ns, Name: name, Member: subjectKey(ev.Kind, ev.Namespace, ev.Name),
		Healthy: ev.Explanation.Healthy, Gone: ev.Type == Delete, Severity: ev.Explanation.Severity,
	}, ev.Time)
	ev.Incident = &inc
	if n.logs != nil && ev.Kind == "Pod" && ev.Type != Delete && !ev.Explanation.Healthy && ev.Explanation.ExitCode != nil {
		ev.logs = &lazyLogs{f: n.logs.fetcher, ns: ev.Namespace, name: ev.Name, c: ev.Explanation.Container}
	}
}

// resolveDue sends the resolves of the incidents that are due.
func (n *Notifier) resolveDue() {
	now := n.opts.Now()
	for _, inc := range n.incidents.expire(now) {
		ev := &Event{
			Type: Update, Kind: inc.Kind, Namespace: inc.Namespace, Name: inc.Name,
			Resource: "incident:" + inc.ID, Cluster: n.cfg.ClusterName, Time: now, Incident: &inc,
			resolve: &resolveRefs{id: inc.ID, tr: n.incidents},
		}
		ev.resolve.n.Store(1)
		n.log.Info("Incident resolved", "incident", inc.ID, "kind", inc.Kind, "namespace", inc.Namespace, "name", inc.Name, "changes", inc.Changes, "flaps", inc.Flaps)
		for _, d := range n.deliveries {
			d.offer(ev)
		}
		ev.finish(true)
	}
}

// logSource is the pods/log access of incidents.loglines.
type logSource struct {
	fetcher *logFetcher // nil: no API access given
}

// Routing describes, one line each, the incidents, each sink's route and
// the silences of c, for `notifier config check`.
func (c *Config) Routing() []string {
	var out []string
	for _, s := range c.Sinks {
		var route []string
		f := s.Filter
		if len(f.Namespaces) > 0 {
			route = append(route, "namespaces "+strings.Join(f.Namespaces, ", "))
		}
		if len(f.ExcludeNamespaces) > 0 {
			route = append(route, "not namespaces "+strings.Join(f.ExcludeNamespaces, ", "))
		}
		if len(f.Resources) > 0 {
			route = append(route, "kinds "+strings.Join(f.Resources, ", "))
		}
		if f.Severity != "" {
			route = append(route, "severity at least "+f.Severity)
		}
		if f.LabelSelector != "" {
			route = append(route, "labels "+f.LabelSelector)
		}
		if len(f.Events) > 0 {
			var evs []string
			for _, e := range f.Events {
				evs = append(evs, string(e))
			}
			route = append(route, "events "+strings.Join(evs, ", "))
		}
		if len(route) == 0 && !s.Incidents {
			continue // kubewatch's: every change, a message each
		}
		line := "route " + s.Name + ": "
		if len(route) == 0 {
			line += "every change"
		} else {
			line += strings.Join(route, "; ")
		}
		switch {
		case !s.Incidents:
			line += "; a message per change (kubewatch's)"
		case incidentUpdates(s.Type):
			line += "; incidents, every change"
		default:
			line += "; incidents, open and resolved only"
		}
		out = append(out, line)
	}
	if slices.ContainsFunc(c.Sinks, func(s SinkConfig) bool { return s.Incidents }) {
		i := c.Incidents
		line := fmt.Sprintf("incidents: resolved %v after the last change once healthy", cmp.Or(i.Window, DefaultIncidentWindow))
		if i.GroupByOwner {
			line += "; grouped by owner"
		}
		if i.LogLines > 0 {
			line += fmt.Sprintf("; last %d log lines of a failed container", i.LogLines)
		}
		out = append(out, line)
	}
	if c.Silences.Enabled {
		if s, err := newSilencer(c.Silences); err == nil {
			for _, d := range s.describe() {
				out = append(out, "silence: "+d)
			}
		}
	}
	return out
}
