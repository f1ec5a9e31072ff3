package notifier

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/watcher"
)

// testSource is a source feeding one unfiltered delivery whose queue the
// test reads.
func testSource(t *testing.T, policy UpdatePolicy) (*source, *delivery, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := newFilter(FilterConfig{})
	d := &delivery{name: "q", filter: f, queue: make(chan *Event, 10), m: m, log: slog.New(slog.DiscardHandler)}
	n := &Notifier{cfg: Config{Updates: policy}, m: m, log: slog.New(slog.DiscardHandler), deliveries: []*delivery{d},
		opts: Options{Now: func() time.Time { return testTime }}}
	return &source{n: n, resource: "configmap", kind: "ConfigMap", apiVersion: "v1", scope: "configmap@ns"}, d, reg
}

func queued(d *delivery) []*Event {
	var out []*Event
	for len(d.queue) > 0 {
		out = append(out, <-d.queue)
	}
	return out
}

func cm(rv string, data map[string]string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: rv, Labels: labels}, Data: data}
}

func TestSource_InitialListIsNotNotified(t *testing.T) {
	s, d, reg := testSource(t, UpdatePolicy{})
	s.add(cm("1", nil, nil), true)
	if q := queued(d); len(q) != 0 {
		t.Errorf("initial add queued %d events", len(q))
	}
	if v := metricstest.Value(t, reg, MetricSuppressed, "reason", "initial"); v != 1 {
		t.Errorf("suppressed{initial} = %v, want 1", v)
	}
	s.add(cm("2", map[string]string{"k": "v"}, map[string]string{"app": "web"}), false)
	q := queued(d)
	if len(q) != 1 {
		t.Fatalf("later add queued %d events, want 1", len(q))
	}
	ev := q[0]
	if ev.Type != Create || ev.Kind != "ConfigMap" || ev.Namespace != "ns" || ev.Name != "c" || ev.Labels["app"] != "web" ||
		ev.Object["kind"] != "ConfigMap" || ev.Object["apiVersion"] != "v1" || !ev.Time.Equal(testTime) {
		t.Errorf("event %+v", ev)
	}
}

func TestSource_SuppressesUpdatesThatChangeNothingAndOptionallyStatusOrMetadataOnly(t *testing.T) {
	podOld := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "1"}}
	podStatus := podOld.DeepCopy()
	podStatus.ResourceVersion = "2"
	podStatus.Status.Phase = corev1.PodRunning
	cases := []struct {
		name       string
		policy     UpdatePolicy
		old, new   watcher.Object
		wantReason string   // suppression reason, "" for notified
		wantPaths  []string // when notified
	}{
		{"same resourceVersion (replay)", UpdatePolicy{}, cm("1", map[string]string{"k": "a"}, nil), cm("1", map[string]string{"k": "a"}, nil), "unchanged", nil},
		{"only the resourceVersion moved", UpdatePolicy{}, cm("1", map[string]string{"k": "a"}, nil), cm("2", map[string]string{"k": "a"}, nil), "noop", nil},
		{"data changed", UpdatePolicy{IgnoreStatusOnly: true, IgnoreMetadataOnly: true}, cm("1", map[string]string{"k": "a"}, nil), cm("2", map[string]string{"k": "b"}, nil), "", []string{"data.k"}},
		{"labels only, kept", UpdatePolicy{}, cm("1", nil, nil), cm("2", nil, map[string]string{"a": "b"}), "", []string{"metadata.labels"}},
		{"labels only, ignored", UpdatePolicy{IgnoreMetadataOnly: true}, cm("1", nil, nil), cm("2", nil, map[string]string{"a": "b"}), "metadata", nil},
		{"status only, kept", UpdatePolicy{}, podOld, podStatus, "", []string{"status.phase"}},
		{"status only, ignored", UpdatePolicy{IgnoreStatusOnly: true}, podOld, podStatus, "status", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, d, reg := testSource(t, tc.policy)
			s.update(tc.old, tc.new)
			q := queued(d)
			if tc.wantReason != "" {
				if len(q) != 0 {
					t.Errorf("notified %v, want suppressed", q[0].Changes)
				}
				if v := metricstest.Value(t, reg, MetricSuppressed, "reason", tc.wantReason); v != 1 {
					t.Errorf("suppressed{%s} = %v, want 1", tc.wantReason, v)
				}
				return
			}
			if len(q) != 1 || q[0].Type != Update || !slices.Equal(q[0].Changes, tc.wantPaths) {
				t.Errorf("queued %+v, want one update of %q", q, tc.wantPaths)
			}
		})
	}
}

func TestSource_RedactsSecretsAndKeepsCustomResourceMapsUntouched(t *testing.T) {
	s, d, _ := testSource(t, UpdatePolicy{})
	s.kind, s.resource = "Secret", "secret"
	s.del(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"pw": []byte("hunter2")}}, false)
	q := queued(d)
	if len(q) != 1 || q[0].Type != Delete || q[0].Object["data"].(map[string]any)["pw"] != redactedBase64 {
		t.Fatalf("queued %+v, want a delete with redacted data", q)
	}

	// A core Secret listed under customresources comes unstructured.
	s, d, _ = testSource(t, UpdatePolicy{})
	s.kind, s.resource = "secrets", "secrets"
	s.add(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}, "data": map[string]any{"pw": "aHVudGVyMg=="}}}, false)
	q = queued(d)
	if len(q) != 1 || q[0].Object["data"].(map[string]any)["pw"] != redactedBase64 {
		t.Fatalf("queued %+v, want a create with redacted data", q)
	}

	s, d, _ = testSource(t, UpdatePolicy{})
	s.kind, s.resource, s.apiVersion = "foos", "foos", "example.com/v1"
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Foo", "metadata": map[string]any{"name": "f", "namespace": "ns", "resourceVersion": "1"}, "spec": map[string]any{"x": int64(1)}}}
	u2 := u.DeepCopy()
	u2.SetResourceVersion("2")
	u2.Object["spec"].(map[string]any)["x"] = int64(2)
	s.update(u, u2)
	q = queued(d)
	if len(q) != 1 || q[0].Kind != "foos" || !slices.Equal(q[0].Changes, []string{"spec.x"}) {
		t.Fatalf("queued %+v, want an update of foos changing spec.x", q)
	}
	if u2.Object["kind"] != "Foo" {
		t.Error("the cached unstructured object was changed")
	}
}

// kubectl apply keeps the whole applied manifest, data included, in an
// annotation: a Secret's values in plain JSON.
func TestSource_RedactsASecretsLastAppliedConfiguration(t *testing.T) {
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	applied := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"},"stringData":{"pw":"hunter2"}}`
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "1",
		Annotations: map[string]string{lastApplied: applied, "team": "a"}}, Data: map[string][]byte{"pw": []byte("hunter2")}}
	changed := secret.DeepCopy()
	changed.ResourceVersion = "2"
	changed.Annotations[lastApplied] = strings.Replace(applied, "hunter2", "hunter3", 1)
	changed.Data["pw"] = []byte("hunter3")

	s, d, _ := testSource(t, UpdatePolicy{})
	s.kind, s.resource = "Secret", "secret"
	s.add(secret, false)
	s.update(secret, changed)
	s.del(changed, true)
	// The same Secret listed under customresources comes unstructured.
	s.kind, s.resource = "secrets", "secrets"
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "s", "namespace": "ns", "annotations": map[string]any{lastApplied: applied}}}}
	s.add(u, false)

	q := queued(d)
	if len(q) != 4 {
		t.Fatalf("queued %d events, want 4", len(q))
	}
	for _, ev := range q {
		body, err := webhookBody(ev, ev.Message(), SinkConfig{IncludeObject: true})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), "hunter") || strings.Contains(string(body), "aHVudGVy") {
			t.Errorf("%s: a secret value reached the payload: %s", ev.Type, body)
		}
		meta := ev.Object["metadata"].(map[string]any)
		ann := meta["annotations"].(map[string]any)
		if ann[lastApplied] != Redacted {
			t.Errorf("%s: %s = %v, want %q", ev.Type, lastApplied, ann[lastApplied], Redacted)
		}
		if ev.Resource == "secret" && ann["team"] != "a" {
			t.Errorf("%s: other annotations lost: %v", ev.Type, ann)
		}
	}
	if u.GetAnnotations()[lastApplied] != applied || secret.Annotations[lastApplied] != applied {
		t.Error("redaction changed the cached object")
	}
}

// diff caps the paths it reports with "...": the status-only and
// metadata-only policies must judge all of them, not the capped list.
func TestSource_StatusOnlyUpdateWithManyChangedFieldsIsSuppressed(t *testing.T) {
	node := func(rv string, heartbeat string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv}}
		for i := range 60 {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("img-%d:%s", i, heartbeat)}})
		}
		return n
	}
	s, d, reg := testSource(t, UpdatePolicy{IgnoreStatusOnly: true})
	s.kind, s.resource = "Node", "node"
	s.update(node("1", "a"), node("2", "b"))
	if q := queued(d); len(q) != 0 {
		t.Errorf("a status-only update of 60 fields was notified: %q", q[0].Changes)
	}
	if v, _ := metricstest.Find(t, reg, MetricSuppressed, "reason", "status"); v != 1 {
		t.Errorf("suppressed{status} = %v, want 1", v)
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

func fmtChanges(c []string) string { return fmt.Sprint(c) }
