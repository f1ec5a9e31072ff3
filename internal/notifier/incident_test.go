package notifier

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// A scripted life of incidents: each step is a change (or a tick) at a
// time, and what the tracker says.
func TestIncidentTracker_GroupsChangesFlapsAndResolvesAfterTheQuietWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pod := func(name string, healthy, gone bool) incidentChange {
		return incidentChange{Kind: "Deployment", Namespace: "ns", Name: "web", Member: "Pod/ns/" + name, Healthy: healthy, Gone: gone, Severity: SeverityFailed}
	}
	type step struct {
		c        *incidentChange
		at       int
		state    string // of the change's incident
		seq      int
		flaps    int
		resolved int // incidents resolved by a tick at this time
	}
	ch := func(c incidentChange) *incidentChange { return &c }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a crash loop is one incident with flaps, resolved after recovery and the window", []step{
			{c: ch(pod("a", false, false)), at: 0, state: IncidentOpen, seq: 1},
			{c: ch(pod("a", true, false)), at: 5, state: IncidentUpdate, seq: 2},
			{c: ch(pod("a", false, false)), at: 8, state: IncidentUpdate, seq: 3, flaps: 1},
			{c: ch(pod("a", true, false)), at: 12, state: IncidentUpdate, seq: 4, flaps: 1},
			{c: ch(pod("a", false, false)), at: 15, state: IncidentUpdate, seq: 5, flaps: 2},
			{at: 100, resolved: 0}, // unhealthy: stays open however long
			{c: ch(pod("a", true, false)), at: 120, state: IncidentUpdate, seq: 6, flaps: 2},
			{at: 125, resolved: 0}, // within the window
			{at: 180, resolved: 1},
			{c: ch(pod("a", false, false)), at: 181, state: IncidentOpen, seq: 1},
		}},
		{"members of one owner: resolved when all are healthy or gone", []step{
			{c: ch(pod("a", false, false)), at: 0, state: IncidentOpen, seq: 1},
			{c: ch(pod("b", false, false)), at: 1, state: IncidentUpdate, seq: 2},
			{c: ch(pod("a", true, false)), at: 2, state: IncidentUpdate, seq: 3},
			{at: 200, resolved: 0},
			{c: ch(pod("b", false, true)), at: 201, state: IncidentUpdate, seq: 4},
			{at: 261, resolved: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newIncidentTracker(time.Minute)
			var id string
			for i, s := range tc.steps {
				if s.c == nil {
					got := tr.expire(at(s.at))
					if len(got) != s.resolved {
						t.Fatalf("step %d: %d resolved, want %d", i, len(got), s.resolved)
					}
					for _, inc := range got {
						if inc.State != IncidentResolved || inc.ID != id {
							t.Errorf("step %d: resolved %v, want incident %s resolved", i, inc, id)
						}
						tr.done(inc.ID, true)
					}
					continue
				}
				inc := tr.observe(*s.c, at(s.at))
				if inc.State == IncidentOpen {
					if inc.ID == id {
						t.Errorf("step %d: a new incident reused the id %s", i, id)
					}
					id = inc.ID
				}
				if inc.State != s.state || inc.Seq != s.seq || inc.Flaps != s.flaps || inc.ID != id {
					t.Errorf("step %d: got %v flaps %d, want %s #%d flaps %d of %s", i, inc, inc.Flaps, s.state, s.seq, s.flaps, id)
				}
			}
		})
	}
}

// What a restart keeps: the open incident continues with its id, refs
// and counts; a resolve not yet delivered is sent again.
func TestIncidentTracker_ARestartContinuesTheIncidentAndResendsAnUndeliveredResolve(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tr := newIncidentTracker(time.Minute)
	c := incidentChange{Kind: "Pod", Namespace: "ns", Name: "p", Member: "Pod/ns/p", Severity: SeverityFailed}
	open := tr.observe(c, t0)
	tr.setRef(open.ID, "slack", "C1 123")
	other := tr.observe(incidentChange{Kind: "Pod", Namespace: "ns", Name: "q", Member: "Pod/ns/q", Healthy: true}, t0)
	resolving := tr.expire(t0.Add(2 * time.Minute))
	if len(resolving) != 1 || resolving[0].ID != other.ID {
		t.Fatalf("resolved %v, want only %s", resolving, other.ID)
	}
	st, changed := tr.snapshot()
	if !changed {
		t.Fatal("snapshot: not changed after changes")
	}
	b, err := json.Marshal(st) // as the checkpoint stores it
	if err != nil {
		t.Fatal(err)
	}
	var back incidentState
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}

	tr2 := newIncidentTracker(time.Minute)
	tr2.restore(&back)
	if got := tr2.ref(open.ID, "slack"); got != "C1 123" {
		t.Errorf("ref after restore = %q", got)
	}
	next := tr2.observe(incidentChange{Kind: "Pod", Namespace: "ns", Name: "p", Member: "Pod/ns/p", Healthy: true}, t0.Add(3*time.Minute))
	if next.ID != open.ID || next.State != IncidentUpdate || next.Seq != 2 {
		t.Errorf("after restore: %v, want %s update #2", next, open.ID)
	}
	again := tr2.expire(t0.Add(3 * time.Minute))
	if len(again) != 1 || again[0].ID != other.ID || again[0].State != IncidentResolved {
		t.Fatalf("after restore, resolves %v, want %s sent again", again, other.ID)
	}
	tr2.done(other.ID, true)
	if got := tr2.expire(t0.Add(3 * time.Minute)); len(got) != 0 {
		t.Errorf("resolved again after done: %v", got)
	}
}

func TestExplain_PodAndWorkloadReasons(t *testing.T) {
	obj := func(js string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	rs := `"metadata":{"labels":{"pod-template-hash":"5d8f"},"ownerReferences":[{"kind":"ReplicaSet","name":"web-5d8f","controller":true}]}`
	for _, tc := range []struct {
		name, kind, obj string
		want            string // reason
		healthy         bool
		severity        string
		check           func(*Explanation) bool
	}{
		{"running and ready", "Pod", `{` + rs + `,"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],"containerStatuses":[{"name":"app","restartCount":0,"state":{"running":{}}}]}}`,
			"", true, SeverityInfo, func(e *Explanation) bool { return e.Owner == "Deployment/web" }},
		{"crash loop after an OOM kill", "Pod", `{` + rs + `,"status":{"phase":"Running","containerStatuses":[{"name":"app","restartCount":4,"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 40s"}},"lastState":{"terminated":{"reason":"OOMKilled","exitCode":137}}}]}}`,
			"CrashLoopBackOff", false, SeverityFailed, func(e *Explanation) bool {
				return e.ExitCode != nil && *e.ExitCode == 137 && e.TerminationReason == "OOMKilled" && e.Restarts == 4 && e.Container == "app"
			}},
		{"unschedulable, with the scheduler's message", "Pod", `{"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes are available"}]}}`,
			"Unschedulable", false, SeverityFailed, func(e *Explanation) bool { return e.Message == "0/3 nodes are available" }},
		{"image pull", "Pod", `{"status":{"phase":"Pending","containerStatuses":[{"name":"app","state":{"waiting":{"reason":"ImagePullBackOff"}}}]}}`,
			"ImagePullBackOff", false, SeverityFailed, nil},
		{"evicted", "Pod", `{"status":{"phase":"Failed","reason":"Evicted","message":"low on memory"}}`, "Evicted", false, SeverityFailed, nil},
		{"pending", "Pod", `{"status":{"phase":"Pending"}}`, "Pending", false, SeverityWarning, nil},
		{"succeeded", "Pod", `{"status":{"phase":"Succeeded"}}`, "", true, SeverityInfo, nil},
		{"deployment past its deadline", "Deployment", `{"spec":{"replicas":3},"status":{"readyReplicas":1,"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded"}]}}`,
			"ProgressDeadlineExceeded", false, SeverityFailed, func(e *Explanation) bool { return e.Replicas == "1/3" }},
		{"deployment rolling", "Deployment", `{"spec":{"replicas":3},"status":{"readyReplicas":2}}`, "NotReady", false, SeverityWarning, nil},
		{"warning event", "Event", `{"type":"Warning","reason":"BackOff","message":"restarting"}`, "BackOff", true, SeverityWarning, nil},
		{"config map", "ConfigMap", `{"data":{}}`, "", true, SeverityInfo, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := explain(tc.kind, obj(tc.obj))
			if e.Reason != tc.want || e.Healthy != tc.healthy || e.Severity != tc.severity || (tc.check != nil && !tc.check(e)) {
				b, _ := json.Marshal(e)
				t.Errorf("explain = %s, want reason %q healthy %v severity %s", b, tc.want, tc.healthy, tc.severity)
			}
		})
	}
}

func TestSilencer_TimeOfDayAndSilenceUntilOnTheObjectOrItsNamespace(t *testing.T) {
	s, err := newSilencer(SilenceConfig{Enabled: true, Times: []QuietTime{{From: "22:00", To: "06:00", Namespaces: []string{"batch"}}}})
	if err != nil {
		t.Fatal(err)
	}
	night := time.Date(2026, 12, 7, 23, 30, 0, 0, time.UTC)
	day := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ev := func(ns string, ann map[string]any, labels map[string]string) *Event {
		return &Event{Namespace: ns, Labels: labels, Object: map[string]any{"metadata": map[string]any{"annotations": ann}}}
	}
	for _, tc := range []struct {
		name string
		ev   *Event
		now  time.Time
		want bool
	}{
		{"quiet time in its namespace", ev("batch", nil, nil), night, true},
		{"quiet time past midnight", ev("batch", nil, nil), night.Add(6 * time.Hour).Add(-time.Minute), true},
		{"outside the quiet time", ev("batch", nil, nil), day, false},
		{"another namespace", ev("web", nil, nil), night, false},
		{"annotation in the future", ev("web", map[string]any{"notifier.kloop.dev/silence-until": "2026-12-07T13:00:00Z"}, nil), day, true},
		{"annotation in the past", ev("web", map[string]any{"notifier.kloop.dev/silence-until": "2026-12-07T11:00:00Z"}, nil), day, false},
		{"label, written without colons", ev("web", nil, map[string]string{"notifier.kloop.dev/silence-until": "20261207T1300Z"}), day, true},
	} {
		if got := s.silenced(tc.ev, tc.now) != ""; got != tc.want {
			t.Errorf("%s: silenced %v, want %v", tc.name, got, tc.want)
		}
	}
	// A Deployment's silence silences its Pods, once the Deployment was
	// seen (it is watched), and until it is lifted.
	dep := ev("web", map[string]any{"notifier.kloop.dev/silence-until": "2026-12-07T13:00:00Z"}, nil)
	dep.Kind, dep.Name = "Deployment", "api"
	pod := ev("web", nil, nil)
	pod.Kind, pod.Name, pod.Explanation = "Pod", "api-5d8f-x", &Explanation{Owner: "Deployment/api"}
	if s.silenced(pod, day) != "" {
		t.Error("a pod silenced before its Deployment's silence was seen")
	}
	if s.silenced(dep, day) == "" || !strings.Contains(s.silenced(pod, day), "on its owner Deployment/api") {
		t.Errorf("the Deployment's silence does not reach its pod: %q", s.silenced(pod, day))
	}
	dep.Object = map[string]any{"metadata": map[string]any{}}
	if s.silenced(dep, day) != "" || s.silenced(pod, day) != "" {
		t.Error("the silence stays after the annotation is removed")
	}
	if _, err := newSilencer(SilenceConfig{Times: []QuietTime{{From: "25:00", To: "06:00"}}}); err == nil || !strings.Contains(err.Error(), "silences.times[0].from") {
		t.Errorf("a bad time: %v, want an error naming silences.times[0].from", err)
	}
}

// The log lines a real HTTP server on loopback returns are cut to the
// last N and redacted. The server stands in for the API server's pods/log
// (same path and query): the API server itself cannot serve a log here,
// having no kubelet (the end-to-end test shows its answer).
func TestLogFetcher_LastLinesRedactedFromAnHTTPServer(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods/p/log" {
			http.NotFound(w, r)
			return
		}
		query = r.URL.RawQuery
		_, _ = w.Write([]byte("starting\nconnecting with password=hunter2 to db\nAuthorization: Bearer abc.def\ncard 4111\nout of memory\n"))
	}))
	defer srv.Close()
	f, err := newLogFetcher(&rest.Config{Host: srv.URL}, 4, []string{`card \d+`})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := f.fetch(t.Context(), "ns", "p", "app")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"connecting with password=[redacted] to db", "Authorization: Bearer [redacted]", "[redacted]", "out of memory"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, q := range []string{"previous=true", "tailLines=4", "container=app"} {
		if !strings.Contains(query, q) {
			t.Errorf("query %q lacks %s", query, q)
		}
	}
}
