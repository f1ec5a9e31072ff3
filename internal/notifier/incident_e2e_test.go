package notifier

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
)

// fakeNow is the notifier's clock in the incident tests: it stands still
// during a scenario, so no incident resolves early however slow the
// machine, and is moved past the window to resolve.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// podStatus is what a kubelet would write: running and ready, or waiting
// in CrashLoopBackOff after an OOM kill (exit code 137). podsim does not
// simulate restarts, so the test writes them, on a pod bound to a node
// that does not exist (no podsim overwrites them).
func podStatus(ready bool, restarts int32) corev1.PodStatus {
	now := metav1.Now()
	cs := corev1.ContainerStatus{Name: "app", Image: "busybox", RestartCount: restarts, Ready: ready}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=app"}
	}
	if restarts > 0 {
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, StartedAt: now, FinishedAt: now}
	}
	return corev1.PodStatus{
		Phase:             corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{cs},
	}
}

func crashPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

func setPodStatus(t *testing.T, kc kubernetes.Interface, ns, name string, st corev1.PodStatus) {
	t.Helper()
	p, err := kc.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = st
	if _, err := kc.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// slackUpdates records the chat.update calls the slack peer gets
// (slack-go's test server has no chat.update of its own).
func slackUpdates(p *slackPeer) *inbox {
	box := newInbox()
	p.Handle("/chat.update", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v, _ := url.ParseQuery(string(body))
		b, _ := json.Marshal(map[string]string{"channel": v.Get("channel"), "ts": v.Get("ts"), "attachments": v.Get("attachments")})
		box.add(string(b))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": v.Get("channel"), "ts": v.Get("ts")})
	})
	return box
}

func incidentOf(t *testing.T, body string) (Incident, *Explanation) {
	t.Helper()
	var p webhookPayload
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Incident == nil {
		t.Fatalf("not an incident payload (%v): %s", err, body)
	}
	return *p.Incident, p.Explanation
}

// A Pod crash-looping (OOMKilled, exit code 137) is one incident per
// sink: Slack posts once, updates in place and replies in the thread at
// the resolve; the webhook and CloudEvents carry one id with rising
// sequence numbers; the mail says open and resolved only. A restart of
// the notifier in the middle continues the incident (same id, same Slack
// message). A pod in a silenced namespace sends nothing, and a route by
// namespace sends only to its sink.
func TestNotifier_ACrashLoopIsOneIncidentPerSinkAcrossARestart(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "incident")
	quiet := testenv.NewNamespace(t, kc, "incident-quiet")
	for _, n := range []string{ns, quiet} {
		if _, err := kc.CoreV1().ServiceAccounts(n).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	qns, err := kc.CoreV1().Namespaces().Get(ctx, quiet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qns.Annotations = map[string]string{"notifier.kloop.dev/silence-until": "2999-01-01T00:00:00Z"}
	if _, err := kc.CoreV1().Namespaces().Update(ctx, qns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	js := newJSONPeer(t)
	sl := newSlackPeer(t)
	updates := slackUpdates(sl)
	ce := newCloudEventPeer(t)
	mail := newSMTPPeer(t, false, "PLAIN")
	both := FilterConfig{Namespaces: []string{ns, quiet}}
	cfg := Config{
		Resources:  []string{"pod"},
		Checkpoint: CheckpointConfig{Namespace: ns, Name: "incident-checkpoint"},
		Incidents:  IncidentConfig{Window: time.Minute, LogLines: 5},
		Silences:   SilenceConfig{Enabled: true},
		Sinks: []SinkConfig{
			{Type: SinkWebhook, URL: js.URL + "/webhook", Incidents: true, Filter: both},
			{Type: SinkSlack, URL: sl.GetAPIURL(), Token: "xoxb-1", Channel: "C1", Incidents: true, Filter: both},
			{Type: SinkCloudEvent, URL: ce.URL, Incidents: true, Filter: both},
			{Type: SinkSMTP, Cert: mail.CAFile, Incidents: true, Filter: both, SMTP: SMTPConfig{To: "ops@example.com", From: "kw@example.com",
				Smarthost: mail.Addr, RequireTLS: true, Auth: SMTPAuth{Username: smtpUser, Password: smtpPassword}}},
			// Routes: failures in ns go to ops; team-b's namespace
			// has none.
			{Name: "ops", Type: SinkWebhook, URL: js.URL + "/ops", Incidents: true, Filter: FilterConfig{Namespaces: []string{ns}, Severity: SeverityFailed}},
			{Name: "team-b", Type: SinkWebhook, URL: js.URL + "/team-b", Incidents: true, Filter: FilterConfig{Namespaces: []string{"team-b"}}},
		},
	}
	clock := &fakeNow{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	logs := &logBuffer{}
	start := func() (<-chan error, context.CancelFunc) {
		n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: prometheus.NewRegistry()}), cfg,
			Options{Now: clock.now, RESTConfig: e.Config, CheckpointInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return runSynced(t, n, logs)
	}
	defer func() {
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()
	done, stop := start()

	// The silenced namespace's pod goes first: the informer hands the
	// changes of all pods over in order, so once ns's pod is notified,
	// the quiet one was judged.
	if _, err := kc.CoreV1().Pods(quiet).Create(ctx, crashPod("quiet-pod"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, kc, quiet, "quiet-pod", podStatus(false, 1))
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, crashPod("crasher"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hook := js.box("/webhook")
	first := hook.waitFor(t, "webhook", `"state":"open"`, "crasher")
	inc, _ := incidentOf(t, first)

	// Crash, recover, crash: one incident with a flap. Each state is
	// seen before the next is written: an informer that falls behind
	// merges the changes of an object, and a recovery merged away is no
	// flap.
	setPodStatus(t, kc, ns, "crasher", podStatus(false, 1))
	hook.waitFor(t, "webhook", `"restarts":1`, `"healthy":false`)
	setPodStatus(t, kc, ns, "crasher", podStatus(true, 1))
	hook.waitFor(t, "webhook", `"restarts":1`, `"healthy":true`)
	setPodStatus(t, kc, ns, "crasher", podStatus(false, 2))
	_, x := incidentOf(t, hook.waitFor(t, "webhook", `"flaps":1`, `"restarts":2`))
	if x.Reason != "CrashLoopBackOff" || x.TerminationReason != "OOMKilled" || x.ExitCode == nil || *x.ExitCode != 137 || x.Restarts != 2 {
		t.Errorf("explanation %+v: want CrashLoopBackOff after OOMKilled, exit code 137, 2 restarts", x)
	}
	// No kubelet here: the API server's own answer says why there are no
	// log lines.
	t.Logf("without a kubelet: %s", x.LogsUnavailable)
	if !strings.HasPrefix(x.LogsUnavailable, "logs unavailable: the API server answered") {
		t.Errorf("logsUnavailable %q: want the API server's answer", x.LogsUnavailable)
	}
	mail.box.waitFor(t, "smtp", "[OPEN]")
	sl.box.waitFor(t, "slack", "crasher")

	// A restart in the middle of the incident.
	stop()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}
	done, stop = start()
	defer func() {
		stop()
		<-done
	}()
	setPodStatus(t, kc, ns, "crasher", podStatus(false, 3))
	after, _ := incidentOf(t, hook.waitFor(t, "webhook", `"restarts":3`))
	if after.ID != inc.ID || after.State != IncidentUpdate {
		t.Errorf("after the restart: %v, want an update of %s", after, inc.ID)
	}

	// Recovered; past the window it resolves.
	setPodStatus(t, kc, ns, "crasher", podStatus(true, 3))
	hook.waitFor(t, "webhook", `"restarts":3`, `"healthy":true`)
	clock.advance(2 * time.Minute)
	resolved, _ := incidentOf(t, hook.waitFor(t, "webhook", `"state":"resolved"`))
	if resolved.ID != inc.ID || resolved.Flaps < 1 {
		t.Errorf("resolved %v (flaps %d), want %s with a flap", resolved, resolved.Flaps, inc.ID)
	}
	mail.box.waitFor(t, "smtp", "[RESOLVED]")
	ce.box.waitFor(t, "cloudevent", `"incidentstate":"resolved"`)
	sl.box.waitFor(t, "slack thread", "RESOLVED", `"thread_ts"`)

	// The webhook: one id, one open, sequence rising, resolved last.
	var seqs []int
	for _, b := range hook.all() {
		i, _ := incidentOf(t, b)
		if i.ID != inc.ID {
			t.Errorf("webhook: a second incident %v", i)
		}
		seqs = append(seqs, i.Seq)
		if (i.State == IncidentOpen) != (len(seqs) == 1) {
			t.Errorf("webhook: message %d is %s", len(seqs), i.State)
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("webhook: sequence numbers not rising: %v", seqs)
		}
	}
	// Slack: one post in the channel, then updates of it, and the
	// resolve's reply in its thread.
	msgs := sl.messages(t)
	if len(msgs) != 2 || msgs[0].ThreadTimestamp != "" || msgs[1].ThreadTimestamp != msgs[0].Timestamp {
		t.Errorf("slack: want one post and one reply in its thread, got %+v", msgs)
	}
	ups := updates.all()
	if len(ups) < 4 {
		t.Errorf("slack: %d chat.update calls, want one per later change (at least 4)", len(ups))
	}
	for _, u := range ups {
		if !strings.Contains(u, `"ts":"`+msgs[0].Timestamp+`"`) {
			t.Errorf("slack: an update of another message: %s", u)
		}
	}
	// Mail: the open and the resolve, nothing between.
	if got := mail.box.all(); len(got) != 2 {
		t.Errorf("smtp: %d mails, want 2 (open, resolved)", len(got))
	}
	// CloudEvents: one id.
	for _, ev := range ce.events() {
		if id, _ := ev.Extensions()["incidentid"].(string); id != inc.ID {
			t.Errorf("cloudevent: incidentid %v, want %s", ev.Extensions()["incidentid"], inc.ID)
		}
	}
	// Routes and silences.
	if got := js.box("/team-b").all(); len(got) != 0 {
		t.Errorf("team-b's route got %d messages: %v", len(got), got)
	}
	ops := js.box("/ops").all()
	if len(ops) == 0 {
		t.Error("the ops route got nothing")
	}
	for _, b := range ops {
		if i, _ := incidentOf(t, b); i.ID != inc.ID {
			t.Errorf("ops: %v", i)
		}
	}
	for _, box := range []*inbox{hook, sl.box, ce.box, mail.box, updates, js.box("/ops")} {
		for _, m := range box.all() {
			if strings.Contains(m, "quiet-pod") {
				t.Errorf("the silenced namespace's pod was notified: %s", m)
			}
		}
	}
}

// A rollout that replaces a Deployment's 10 Pods (new ReplicaSet, new
// Pods ready, old ones deleted) is one incident of the Deployment when
// grouping by owner. The test does what the deployment controller would
// (no kube-controller-manager here): the ReplicaSets and Pods it makes.
func TestNotifier_ARolloutOfTenPodsIsOneIncidentOfItsDeployment(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "incident-rollout")
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	dep, err := kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	makeRS := func(hash string) *appsv1.ReplicaSet {
		l := map[string]string{"app": "web", "pod-template-hash": hash}
		rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Labels: l, OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: dep.UID, Controller: &yes}}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	makePod := func(rs *appsv1.ReplicaSet, i int) string {
		p := crashPod(rs.Name + "-" + string(rune('a'+i)))
		p.Labels = rs.Spec.Template.Labels
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
		if _, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, kc, ns, p.Name, podStatus(true, 0))
		return p.Name
	}
	old := makeRS("aaa1")
	var oldPods []string
	for i := range 10 {
		oldPods = append(oldPods, makePod(old, i))
	}

	js := newJSONPeer(t)
	clock := &fakeNow{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	logs := &logBuffer{}
	n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: prometheus.NewRegistry()}), Config{
		Namespace: ns, Resources: []string{"pod"}, Checkpoint: CheckpointConfig{Type: CheckpointNone},
		Incidents: IncidentConfig{Window: time.Minute, GroupByOwner: true},
		Sinks:     []SinkConfig{{Type: SinkWebhook, URL: js.URL + "/webhook", Incidents: true}},
	}, Options{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()

	next := makeRS("bbb2")
	for i := range 10 {
		makePod(next, i)
		// At once, as a kubelet would once the containers stopped.
		if err := kc.CoreV1().Pods(ns).Delete(ctx, oldPods[i], *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
	}
	hook := js.box("/webhook")
	// The last change: the old ReplicaSet's last pod gone.
	hook.waitFor(t, "webhook", `"reason":"Deleted"`, oldPods[9])
	clock.advance(2 * time.Minute)
	hook.waitFor(t, "webhook", `"state":"resolved"`)

	ids := map[string]bool{}
	for _, b := range hook.all() {
		i, _ := incidentOf(t, b)
		ids[i.ID] = true
		if i.Flaps != 0 {
			t.Errorf("%d flaps: a new pod is no flap", i.Flaps)
		}
		if i.Kind != "Deployment" || i.Name != "web" {
			t.Errorf("an incident of %s %s, want Deployment web", i.Kind, i.Name)
		}
	}
	if len(ids) != 1 {
		t.Errorf("%d incidents, want 1", len(ids))
	}
	if got := len(hook.all()); got < 20 {
		t.Errorf("%d messages: want the changes of the 20 pods (at least a create or status of each new one and the delete of each old one)", got)
	}
}

// An OOMKilled container's message carries the reason, the exit code and
// the last lines of its previous log, redacted. The log comes through the
// real API server's pods/log, which asks the node's kubelet: here a TLS
// server on loopback that serves the kubelet's /containerLogs path, named
// as the kubelet of a Node whose address is 127.0.0.1 (the API server
// does not verify a kubelet's certificate unless told a CA).
func TestNotifier_AnOOMKilledPodsMessageCarriesItsLastLogLinesThroughTheAPIServer(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "incident-logs")
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		queries []string
	)
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/containerLogs/"+ns+"/oom/app" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		_, _ = io.WriteString(w, "boot\nloading cache\nDB_PASSWORD=s3cr3t-e2e connecting\nallocating 2GiB\nfatal: out of memory\n")
	}))
	defer kubelet.Close()
	port, err := strconv.Atoi(kubelet.URL[strings.LastIndex(kubelet.URL, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	nodeName := ns + "-node"
	node, err := kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{}) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	js := newJSONPeer(t)
	logs := &logBuffer{}
	n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: prometheus.NewRegistry()}), Config{
		Namespace: ns, Resources: []string{"pod"}, Checkpoint: CheckpointConfig{Type: CheckpointNone},
		Incidents: IncidentConfig{LogLines: 3},
		Sinks:     []SinkConfig{{Type: SinkWebhook, URL: js.URL + "/webhook", Incidents: true}},
	}, Options{RESTConfig: e.Config})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()

	p := crashPod("oom")
	p.Spec.NodeName = nodeName
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, kc, ns, "oom", podStatus(false, 1))
	body := js.box("/webhook").waitFor(t, "webhook", "out of memory")
	inc, x := incidentOf(t, body)
	want := []string{"DB_PASSWORD=[redacted] connecting", "allocating 2GiB", "fatal: out of memory"}
	if strings.Join(x.Logs, "\n") != strings.Join(want, "\n") {
		t.Errorf("log lines %q, want %q", x.Logs, want)
	}
	if x.TerminationReason != "OOMKilled" || x.ExitCode == nil || *x.ExitCode != 137 {
		t.Errorf("explanation %+v: want OOMKilled, exit code 137", x)
	}
	var p2 webhookPayload
	_ = json.Unmarshal([]byte(body), &p2)
	for _, s := range []string{"exit code 137 (OOMKilled)", "fatal: out of memory", inc.ID} {
		if !strings.Contains(p2.Text, s) {
			t.Errorf("text lacks %q:\n%s", s, p2.Text)
		}
	}
	if strings.Contains(body, "s3cr3t-e2e") {
		t.Errorf("a secret in a log line reached the receiver: %s", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) == 0 || !strings.Contains(queries[0], "previous=true") || !strings.Contains(queries[0], "tailLines=3") {
		t.Errorf("the kubelet was asked %q, want previous=true and tailLines=3", queries)
	}
}
