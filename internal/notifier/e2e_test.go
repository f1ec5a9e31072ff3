package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/testenv"
)

// receiver is a webhook endpoint that records what each path received.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  map[string][]webhookPayload
	more chan struct{} // closed and replaced on every request
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string][]webhookPayload{}, more: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p webhookPayload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("%s: payload %s: %v", req.URL.Path, body, err)
		}
		r.mu.Lock()
		r.got[req.URL.Path] = append(r.got[req.URL.Path], p)
		close(r.more)
		r.more = make(chan struct{})
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) payloads(path string) []webhookPayload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[path])
}

// waitFor waits until path has received a payload for which match is
// true, and returns it.
func (r *receiver) waitFor(t *testing.T, path, what string, match func(webhookPayload) bool) webhookPayload {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		for _, p := range r.got[path] {
			if match(p) {
				r.mu.Unlock()
				return p
			}
		}
		more := r.more
		r.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: no %s within 60s; received:\n%s", path, what, summary(r.payloads(path)))
		}
	}
}

func is(reason, kind, name string) func(webhookPayload) bool {
	return func(p webhookPayload) bool {
		return p.EventMeta.Reason == reason && p.EventMeta.Kind == kind && p.EventMeta.Name == name
	}
}

// summary renders payloads one a line: "Created ConfigMap ns/name [changes]".
func summary(ps []webhookPayload) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s %s %s/%s", p.EventMeta.Reason, p.EventMeta.Kind, p.EventMeta.Namespace, p.EventMeta.Name)
		if len(p.Changes) > 0 {
			fmt.Fprintf(&b, " %v", p.Changes)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func TestNotifier_NotifiesChangesAfterStartOnlyAndSuppressesNoOpAndStatusUpdates(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier")
	other := testenv.NewNamespace(t, kc, "notifier-other")
	// Pods need their namespace's default ServiceAccount, which nothing
	// makes here (no kube-controller-manager).
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kc.CoreV1().ConfigMaps(ns)
	pods := kc.CoreV1().Pods(ns)
	// Objects that exist before the start are never notified as created.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, newPod("before-pod"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	recv := newReceiver(t)
	reg := prometheus.NewRegistry()
	cfg := Config{
		Namespace: ns,
		Resources: []string{"configmap", "pod", "secret"},
		Updates:   UpdatePolicy{IgnoreStatusOnly: true},
		Sinks: []SinkConfig{
			{Name: "all", Type: SinkWebhook, URL: recv.URL + "/all", IncludeObject: true, IncludeChanges: true},
			{Name: "web-deletes", Type: SinkWebhook, URL: recv.URL + "/web-deletes",
				Filter: FilterConfig{Events: []EventType{Delete}, LabelSelector: "app=web"}},
		},
	}
	logs := &logBuffer{}
	n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: reg}), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)
	defer func() {
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()

	// ConfigMaps: create, update, a no-op update, delete.
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := recv.waitFor(t, "/all", "create of c1", is("Created", "ConfigMap", "c1"))
	if created.EventMeta.Namespace != ns || created.Object["data"].(map[string]any)["k"] != "v1" {
		t.Errorf("create payload: namespace %q, object %v", created.EventMeta.Namespace, created.Object)
	}
	cm.Data["k"] = "v2"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := recv.waitFor(t, "/all", "update of c1", is("Updated", "ConfigMap", "c1"))
	if !slices.Equal(updated.Changes, []string{"data.k"}) {
		t.Errorf("update changes = %q, want [data.k]", updated.Changes)
	}
	// An update that changes nothing: the API server keeps the
	// resourceVersion and sends no event; nothing must be notified.
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/all", "delete of c1", is("Deleted", "ConfigMap", "c1"))
	recv.waitFor(t, "/web-deletes", "delete of c1 (labelled app=web)", is("Deleted", "ConfigMap", "c1"))

	// Pods: create, a status-only update (suppressed), a label change,
	// delete. The label change is the next pod notification after the
	// create: nothing for the status.
	if _, err := pods.Create(ctx, newPod("p1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/all", "create of p1", is("Created", "Pod", "p1"))
	p, err := pods.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "Example", Status: corev1.ConditionTrue})
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(ctx, "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"db"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := recv.waitFor(t, "/all", "update of p1", is("Updated", "Pod", "p1"))
	if !slices.Equal(labelled.Changes, []string{"metadata.labels", "status.conditions"}) && !slices.Equal(labelled.Changes, []string{"metadata.labels"}) {
		t.Errorf("pod update changes = %q, want the labels (and, if the informer merged the two updates, the conditions)", labelled.Changes)
	}
	if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/all", "delete of p1", is("Deleted", "Pod", "p1"))

	// Secrets: data is redacted in the object; the key stays.
	if _, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec := recv.waitFor(t, "/all", "create of s1", is("Created", "Secret", "s1"))
	if got := sec.Object["data"].(map[string]any)["password"]; got != redactedBase64 {
		t.Errorf("secret data in the payload = %v, want %q", got, redactedBase64)
	}
	if strings.Contains(fmt.Sprint(sec.Object), "aHVudGVyMg") {
		t.Error("the secret's value reached the webhook")
	}

	// Another namespace is out of scope.
	if _, err := kc.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The last change: once it arrives, everything before it has (one
	// sink delivers in order; each informer notifies in order).
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "last"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/all", "create of last", is("Created", "ConfigMap", "last"))

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after a stop", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}

	// Exactly these, per kind in order (kinds interleave as they may).
	want := map[string][]string{
		"ConfigMap": {"Created c1", "Updated c1", "Deleted c1", "Created last"},
		"Pod":       {"Created p1", "Updated p1", "Deleted p1"},
		"Secret":    {"Created s1"},
	}
	got := map[string][]string{}
	all := recv.payloads("/all")
	for _, p := range all {
		if p.EventMeta.Kind == "Pod" && p.EventMeta.Reason == "Updated" && onlyUnder(p.Changes, "metadata") &&
			slices.ContainsFunc(p.Changes, func(c string) bool { return strings.HasPrefix(c, "metadata.deletion") }) {
			continue // the delete's own first step, if the informer did not merge it into the delete
		}
		got[p.EventMeta.Kind] = append(got[p.EventMeta.Kind], p.EventMeta.Reason+" "+p.EventMeta.Name)
	}
	for kind, w := range want {
		if !slices.Equal(got[kind], w) {
			t.Errorf("%s notifications %q, want exactly %q; all:\n%s", kind, got[kind], w, summary(all))
		}
	}
	if len(got) != len(want) {
		t.Errorf("notified kinds %v, want %v", got, want)
	}
	if web := recv.payloads("/web-deletes"); len(web) != 1 {
		t.Errorf("web-deletes sink got %d notifications, want 1 (delete of c1):\n%s", len(web), summary(web))
	} else if web[0].Object != nil {
		t.Error("web-deletes sink got the object though includeobject is off")
	}

	// Metrics.
	if v := metricstest.Value(t, reg, MetricSent, "sink", "all", "resourceType", "ConfigMap", "eventType", "create"); v != 2 {
		t.Errorf("sent{all, ConfigMap, create} = %v, want 2", v)
	}
	if v := metricstest.Value(t, reg, MetricSent, "sink", "web-deletes", "resourceType", "ConfigMap", "eventType", "delete"); v != 1 {
		t.Errorf("sent{web-deletes, ConfigMap, delete} = %v, want 1", v)
	}
	if v := metricstest.Value(t, reg, MetricEvents, "resourceType", "ConfigMap", "eventType", "create"); v != 2 {
		t.Errorf("events{ConfigMap, create} = %v, want 2", v)
	}
	if v := metricstest.Value(t, reg, MetricSuppressed, "resourceType", "ConfigMap", "reason", "initial"); v < 1 {
		t.Errorf("suppressed{ConfigMap, initial} = %v, want at least 1 (before)", v)
	}
	if !slices.Contains(labelled.Changes, "status.conditions") {
		if v := metricstest.Value(t, reg, MetricSuppressed, "resourceType", "Pod", "reason", "status"); v != 1 {
			t.Errorf("suppressed{Pod, status} = %v, want 1 (the condition update)", v)
		}
	}
	if v, _ := metricstest.Find(t, reg, MetricFailed); v != 0 {
		t.Errorf("failed = %v, want 0", v)
	}
}

// runSynced runs n until the test ends and waits until it is synced. stop
// ends Run early; done then receives what Run returned.
func runSynced(t *testing.T, n *Notifier, logs *logBuffer) (done <-chan error, stop context.CancelFunc) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ch := make(chan error, 1)
	go func() { ch <- n.app.Run(ctx) }()
	select {
	case <-n.Synced():
	case err := <-ch:
		t.Fatalf("Run returned before syncing: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatalf("not synced within 60s; logs:\n%s", logs)
	}
	return ch, stop
}

// newApp is the App of one notifier under test: its own registry, no
// server unless kopts asks for one.
func newApp(t *testing.T, cfg *rest.Config, kopts kloop.Options) *kloop.App {
	t.Helper()
	app, err := kloop.New(cfg, kopts)
	if err != nil {
		t.Fatal(err)
	}
	return app
}
