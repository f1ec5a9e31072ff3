package notifier

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func jsonMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDiff_ReportsChangedFieldPaths(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []string
	}{
		{"nothing", `{"a":1}`, `{"a":1}`, nil},
		{"bookkeeping only", `{"metadata":{"resourceVersion":"1","generation":1,"managedFields":[1]}}`,
			`{"metadata":{"resourceVersion":"2","generation":2,"managedFields":[2]}}`, nil},
		{"scalar", `{"data":{"k":"v1","same":"x"}}`, `{"data":{"k":"v2","same":"x"}}`, []string{"data.k"}},
		{"added and removed keys", `{"data":{"gone":"1"}}`, `{"data":{"new":"1"},"binaryData":{}}`, []string{"binaryData", "data.gone", "data.new"}},
		{"list element", `{"spec":{"containers":[{"image":"a"},{"image":"b"}]}}`, `{"spec":{"containers":[{"image":"a"},{"image":"c"}]}}`, []string{"spec.containers[1].image"}},
		{"list length", `{"spec":{"finalizers":["a"]}}`, `{"spec":{"finalizers":["a","b"]}}`, []string{"spec.finalizers"}},
		{"quoted key", `{"metadata":{"labels":{"app.kubernetes.io/name":"a"}}}`, `{"metadata":{"labels":{"app.kubernetes.io/name":"b"}}}`, []string{`metadata.labels["app.kubernetes.io/name"]`}},
		{"type change", `{"a":{"b":1}}`, `{"a":"x"}`, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := diff(jsonMap(t, tc.old), jsonMap(t, tc.new))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("diff = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDiff_CapsThePaths(t *testing.T) {
	old, new := map[string]any{}, map[string]any{}
	for i := range 80 {
		old[strings.Repeat("k", i+1)] = 1
		new[strings.Repeat("k", i+1)] = 2
	}
	got := diff(old, new)
	if len(got) != maxChanges || got[len(got)-1] != "..." {
		t.Errorf("diff of 80 changes: %d paths ending %q, want %d ending \"...\"", len(got), got[len(got)-1], maxChanges)
	}
}

func TestOnlyUnder(t *testing.T) {
	cases := []struct {
		paths  []string
		prefix string
		want   bool
	}{
		{[]string{"status.phase", "status"}, "status", true},
		{[]string{"status.phase", "spec.x"}, "status", false},
		{[]string{"statusX"}, "status", false},
		{[]string{`metadata.labels["a/b"]`, "metadata.annotations"}, "metadata", true},
		{nil, "status", false},
	}
	for _, tc := range cases {
		if got := onlyUnder(tc.paths, tc.prefix); got != tc.want {
			t.Errorf("onlyUnder(%q, %q) = %v, want %v", tc.paths, tc.prefix, got, tc.want)
		}
	}
}

func TestEventMessage_IsKubewatchsTextExactly(t *testing.T) {
	cases := []struct {
		ev   Event
		want string
	}{
		{Event{Type: Create, Kind: "Pod", Namespace: "default", Name: "nginx"}, "A `Pod` in namespace `default` has been `Created`:\n`nginx`"},
		// kubewatch prints the empty namespace of a cluster-scoped object.
		{Event{Type: Delete, Kind: "Namespace", Name: "web"}, "A `Namespace` in namespace `` has been `Deleted`:\n`web`"},
		// The changes are never in the default text (a receiver matching
		// kubewatch's text would break); a template can add them.
		{Event{Type: Update, Kind: "ConfigMap", Namespace: "a", Name: "c", Changes: []string{"data.k", "data.l"}}, "A `ConfigMap` in namespace `a` has been `Updated`:\n`c`"},
		{Event{Type: Update, Kind: "ConfigMap", Namespace: "a", Name: "c", Cluster: "prod"}, "`prod` - A `ConfigMap` in namespace `a` has been `Updated`:\n`c`"},
		{Event{Type: Create, Kind: "testKind", Namespace: "testNamespace", Name: "testResource", Test: true}, "A `testKind` in namespace `testNamespace` has been `Tested`:\n`testResource`"},
	}
	for _, tc := range cases {
		if got := tc.ev.Message(); got != tc.want {
			t.Errorf("Message() = %q, want %q", got, tc.want)
		}
		// The default template is the same text.
		text, _ := newTextFunc("t", DefaultTemplate)
		if got, err := text(&tc.ev); err != nil || got != tc.want {
			t.Errorf("DefaultTemplate = %q, %v; want %q", got, err, tc.want)
		}
	}
}

func TestTemplate_RendersTheEventsFieldsAndFunctions(t *testing.T) {
	ev := &Event{Type: Update, Kind: "ConfigMap", Namespace: "web", Name: "settings", Cluster: "prod",
		Changes: []string{"data.a", "data.b"}, Labels: map[string]string{"app": "shop"}}
	text, err := newTextFunc("t", `{{.Cluster}}/{{.Namespace}}/{{.Name}} {{.Reason}} {{.Status}} {{upper .Kind}} [{{join .Changes ","}}] app={{.Labels.app}} {{json .Labels}}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := text(ev)
	if want := `prod/web/settings Updated Warning CONFIGMAP [data.a,data.b] app=shop {"app":"shop"}`; err != nil || got != want {
		t.Errorf("text = %q, %v; want %q", got, err, want)
	}
	if _, err := newTextFunc("t", "{{.Nope"); err == nil {
		t.Error("a template that does not parse was accepted")
	}
	bad, _ := newTextFunc("t", "{{.Nope}}")
	if _, err := bad(ev); err == nil || isRetryable(err) {
		t.Errorf("a template naming no field: err %v, want a non-retryable error", err)
	}
}

func TestRedactSecret_ReplacesValuesKeepsKeysAndLeavesTheOriginal(t *testing.T) {
	obj := jsonMap(t, `{"kind":"Secret","data":{"password":"aHVudGVyMg=="},"stringData":{"token":"t"},"type":"Opaque"}`)
	got := redactSecret(obj)
	want := jsonMap(t, `{"kind":"Secret","data":{"password":"W3JlZGFjdGVkXQ=="},"stringData":{"token":"[redacted]"},"type":"Opaque"}`)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("redactSecret = %v, want %v", got, want)
	}
	if obj["data"].(map[string]any)["password"] != "aHVudGVyMg==" {
		t.Error("redactSecret changed its argument (the informer's cached object)")
	}
}
