package notifier

import (
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Incident states, as webhook and cloudevent payloads carry them.
const (
	IncidentOpen     = "open"
	IncidentUpdate   = "update"
	IncidentResolved = "resolved"
)

// DefaultIncidentWindow is how long an incident whose objects are all
// healthy (or gone) stays open for a further change before it resolves.
const DefaultIncidentWindow = 5 * time.Minute

// Incident is what a notification of an incident sink says about the
// incident it belongs to. Its subject is the object, or with grouping by
// owner the workload that controls it.
type Incident struct {
	// ID is stable for the incident's life, across restarts.
	ID string `json:"id"`
	// State is open (the first message a sink gets of it), update or
	// resolved.
	State string `json:"state"`
	// Seq counts the incident's changes: 1 for the change that opened
	// it, one more for each later change and for the resolve. A sink that
	// is not sent every change sees gaps.
	Seq  int    `json:"seq"`
	Kind string `json:"kind"`
	// Namespace and Name of the subject.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Changes are the changes the incident took so far; Flaps how often
	// its objects turned unhealthy again after being healthy.
	Changes int       `json:"changes"`
	Flaps   int       `json:"flaps"`
	Opened  time.Time `json:"opened"`
	// Severity is the highest severity of its changes so far: info,
	// warning or failed.
	Severity string `json:"severity"`
}

// incidentRecord is one incident in the tracker and in the checkpoint.
type incidentRecord struct {
	Incident
	Last time.Time `json:"last"`
	// Unhealthy are the member objects (kind/namespace/name) that were
	// unhealthy at their last change.
	Unhealthy map[string]bool `json:"unhealthy,omitempty"`
	// Recovered are the members that were unhealthy and are healthy
	// now: turning unhealthy again is a flap.
	Recovered map[string]bool `json:"recovered,omitempty"`
	// resend: restored as resolving, its resolve is sent again.
	resend bool
}

// incidentChange is one change of a member object, as the tracker sees it.
type incidentChange struct {
	// Subject is what the incident is about: the object, or its owner.
	Kind, Namespace, Name string
	// Member is the changed object's kind/namespace/name.
	Member string
	// Healthy: the object is in a state that needs no attention; Gone: it
	// was deleted.
	Healthy, Gone bool
	Severity      string
}

// incidentTracker is the pure core of incidents: it groups the changes of
// one subject into incidents and says which resolve. It does no I/O and
// starts no goroutine; time is given by the caller. An incident resolves
// once every member is healthy or gone and no change came for window.
type incidentTracker struct {
	window time.Duration

	mu sync.Mutex
	// open: subject key → incident.
	open map[string]*incidentRecord
	// resolving: incidents whose resolved notification is on its way;
	// they stay in the checkpoint until every sink is through with it.
	resolving map[string]*incidentRecord
	// refs: incident id → sink → what the sink needs to update its
	// message (Slack: channel and ts), or "sent".
	refs  map[string]map[string]string
	dirty bool
}

func newIncidentTracker(window time.Duration) *incidentTracker {
	return &incidentTracker{
		window: window, open: map[string]*incidentRecord{},
		resolving: map[string]*incidentRecord{}, refs: map[string]map[string]string{},
	}
}

func subjectKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func incidentID(key string, opened time.Time) string {
	h := fnv.New64a()
	h.Write([]byte(key + "@" + opened.UTC().Format(time.RFC3339Nano)))
	return strconv.FormatUint(h.Sum64(), 36)
}

// severities in rising order.
var severities = []string{SeverityInfo, SeverityWarning, SeverityFailed}

func severityRank(s string) int {
	for i, v := range severities {
		if v == s {
			return i
		}
	}
	return 0
}

// observe takes a change and returns the incident it belongs to after it:
// open for the change that opened it, else update.
func (t *incidentTracker) observe(c incidentChange, now time.Time) Incident {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dirty = true
	key := subjectKey(c.Kind, c.Namespace, c.Name)
	rec, ok := t.open[key]
	if !ok {
		rec = &incidentRecord{Incident: Incident{
			ID: incidentID(key, now), State: IncidentOpen, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name,
			Opened: now, Severity: SeverityInfo,
		}, Unhealthy: map[string]bool{}, Recovered: map[string]bool{}}
		t.open[key] = rec
	} else {
		rec.State = IncidentUpdate
	}
	rec.Seq++
	rec.Changes++
	rec.Last = now
	if severityRank(c.Severity) > severityRank(rec.Severity) {
		rec.Severity = c.Severity
	}
	switch {
	case c.Gone:
		delete(rec.Unhealthy, c.Member)
		delete(rec.Recovered, c.Member)
	case c.Healthy:
		if rec.Unhealthy[c.Member] {
			delete(rec.Unhealthy, c.Member)
			rec.Recovered[c.Member] = true
		}
	case !rec.Unhealthy[c.Member]:
		if rec.Recovered[c.Member] {
			rec.Flaps++
			delete(rec.Recovered, c.Member)
		}
		rec.Unhealthy[c.Member] = true
	}
	return rec.Incident
}

// expire resolves the incidents whose members are all healthy or gone and
// that saw no change for the window, oldest first. Each stays in the
// tracker (resolving) until done is called with its id.
func (t *incidentTracker) expire(now time.Time) []Incident {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Incident
	for key, rec := range t.open {
		if len(rec.Unhealthy) > 0 || now.Sub(rec.Last) < t.window {
			continue
		}
		delete(t.open, key)
		rec.State = IncidentResolved
		rec.Seq++
		t.resolving[rec.ID] = rec
		out = append(out, rec.Incident)
	}
	// Incidents restored as resolving: their resolve may not have been
	// delivered before the stop.
	for _, rec := range t.resolving {
		if rec.resend {
			rec.resend = false
			out = append(out, rec.Incident)
		}
	}
	if len(out) > 0 {
		t.dirty = true
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Opened.Before(out[j].Opened) })
	return out
}

// done forgets a resolved incident once every sink is through with its
// resolve: delivered true, or false when a stop left it undelivered (it is
// sent again after the restart).
func (t *incidentTracker) done(id string, delivered bool) {
	if !delivered {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.resolving, id)
	delete(t.refs, id)
	t.dirty = true
}

// ref is what sink keeps of incident id ("" if it sent nothing of it).
func (t *incidentTracker) ref(id, sink string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refs[id][sink]
}

func (t *incidentTracker) setRef(id, sink, ref string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refs[id] == nil {
		t.refs[id] = map[string]string{}
	}
	t.refs[id][sink] = ref
	t.dirty = true
}

// incidentState is the tracker as the checkpoint keeps it.
type incidentState struct {
	Open      []incidentRecord             `json:"open,omitempty"`
	Resolving []incidentRecord             `json:"resolving,omitempty"`
	Refs      map[string]map[string]string `json:"refs,omitempty"`
}

// snapshot returns the state to save and whether it changed since the
// last snapshot.
func (t *incidentTracker) snapshot() (*incidentState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := t.dirty
	t.dirty = false
	st := &incidentState{Refs: map[string]map[string]string{}}
	for _, r := range t.open {
		c := *r
		c.Unhealthy, c.Recovered = maps.Clone(r.Unhealthy), maps.Clone(r.Recovered)
		st.Open = append(st.Open, c)
	}
	for _, r := range t.resolving {
		st.Resolving = append(st.Resolving, *r)
	}
	for id, m := range t.refs {
		st.Refs[id] = maps.Clone(m)
	}
	sort.Slice(st.Open, func(i, j int) bool { return st.Open[i].ID < st.Open[j].ID })
	sort.Slice(st.Resolving, func(i, j int) bool { return st.Resolving[i].ID < st.Resolving[j].ID })
	return st, changed
}

// restore takes the state a checkpoint kept: the open incidents continue
// (same id), the resolving ones are resolved again.
func (t *incidentTracker) restore(st *incidentState) {
	if st == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range st.Open {
		rec := r
		if rec.Unhealthy == nil {
			rec.Unhealthy = map[string]bool{}
		}
		if rec.Recovered == nil {
			rec.Recovered = map[string]bool{}
		}
		t.open[subjectKey(rec.Kind, rec.Namespace, rec.Name)] = &rec
	}
	for _, r := range st.Resolving {
		rec := r
		rec.resend = true
		t.resolving[rec.ID] = &rec
	}
	for id, m := range st.Refs {
		t.refs[id] = maps.Clone(m)
	}
}

// String is the incident as a log line.
func (i Incident) String() string {
	return fmt.Sprintf("incident %s (%s %s/%s) %s #%d", i.ID, i.Kind, i.Namespace, i.Name, i.State, i.Seq)
}
