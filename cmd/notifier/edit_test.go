package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/notifier"
)

func runCmd(t *testing.T, envm map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = run(context.Background(), args, &out, &errb, env(envm))
	return code, out.String(), errb.String()
}

// `config add <handler>` for each of the ten handlers, kubewatch's flags,
// into one file: `config view` prints it, it parses into those sinks, and
// the notifier builds every sink from it.
func TestConfigAdd_EachHandlerWritesAFileThatViewPrintsAndTheNotifierTakes(t *testing.T) {
	dir := t.TempDir()
	envm := map[string]string{"KW_CONFIG": dir}
	path := filepath.Join(dir, ".kubewatch.yaml")
	adds := [][]string{
		{"slack", "-c", "#k8s", "-t", "xoxb-1", "--title", "prod"},
		{"slackwebhook", "-c", "#k8s", "-n", "kw", "-e", ":eyes:", "-w", "https://hooks.example/x"},
		{"hipchat", "-r", "ops", "-t", "hc", "-u", "https://hipchat.example/v2"},
		{"mattermost", "-c", "ops", "-u", "https://mm.example/hooks/x", "-n", "kw"},
		{"flock", "-u", "https://flock.example/x"},
		{"webhook", "-u", "https://hook.example/x", "--tlsskip"},
		{"cloudevent", "-u", "https://ce.example/"},
		{"msteams", "-w", "https://teams.example/x", "--card", "adaptive"},
		{"smtp", "--to", "ops@example.com", "--from", "kw@example.com", "--smarthost", "mail.example.com:587", "--requiretls", "--username", "kw", "--password", "pw"},
		{"lark", "-u", "https://lark.example/x"},
	}
	for _, a := range adds {
		if code, _, stderr := runCmd(t, envm, append([]string{"config", "add"}, a...)...); code != 0 {
			t.Fatalf("config add %v: exit %d: %s", a, code, stderr)
		}
	}
	if code, _, stderr := runCmd(t, envm, "resource", "add", "--cm", "--po"); code != 0 {
		t.Fatalf("resource add: exit %d: %s", code, stderr)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	code, viewed, _ := runCmd(t, envm, "config", "view")
	if code != 0 || viewed != string(file) {
		t.Errorf("config view = %d, %q; want the file:\n%s", code, viewed, file)
	}
	cfg, err := notifier.LoadConfig(path, env(nil))
	if err != nil {
		t.Fatalf("the written file does not parse: %v\n%s", err, file)
	}
	got := map[string]notifier.SinkConfig{}
	for _, s := range cfg.Sinks {
		got[s.Type] = s
	}
	if len(got) != 10 {
		t.Errorf("%d sinks, want 10:\n%s", len(got), file)
	}
	for typ, check := range map[string]bool{
		notifier.SinkSlack:        got[notifier.SinkSlack].Token == "xoxb-1" && got[notifier.SinkSlack].Channel == "#k8s" && got[notifier.SinkSlack].Title == "prod",
		notifier.SinkSlackWebhook: got[notifier.SinkSlackWebhook].URL == "https://hooks.example/x" && got[notifier.SinkSlackWebhook].Emoji == ":eyes:",
		notifier.SinkHipchat:      got[notifier.SinkHipchat].URL == "https://hipchat.example/v2" && got[notifier.SinkHipchat].Room == "ops",
		notifier.SinkMattermost:   got[notifier.SinkMattermost].Username == "kw" && got[notifier.SinkMattermost].Channel == "ops",
		notifier.SinkWebhook:      got[notifier.SinkWebhook].TLSSkip,
		notifier.SinkMSTeams:      got[notifier.SinkMSTeams].Card == notifier.CardAdaptive,
		notifier.SinkSMTP:         got[notifier.SinkSMTP].SMTP.RequireTLS && got[notifier.SinkSMTP].SMTP.Auth.Password == "pw" && got[notifier.SinkSMTP].SMTP.Smarthost == "mail.example.com:587",
		notifier.SinkLark:         got[notifier.SinkLark].URL == "https://lark.example/x",
	} {
		if !check {
			t.Errorf("%s sink %+v does not hold the flags' values", typ, got[typ])
		}
	}
	if !reflect.DeepEqual(cfg.Resources, []string{"configmap", "pod"}) {
		t.Errorf("resources %q, want configmap and pod", cfg.Resources)
	}
	cfg.Checkpoint.Type = notifier.CheckpointNone
	app, err := kloop.New(&rest.Config{Host: "https://127.0.0.1:1"}, kloop.Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notifier.New(app, *cfg, notifier.Options{}); err != nil {
		t.Errorf("the notifier does not take the file: %v", err)
	}
	// A second add of a handler changes it in place.
	if code, _, stderr := runCmd(t, envm, "config", "add", "flock", "-u", "https://flock.example/y"); code != 0 {
		t.Fatal(stderr)
	}
	cfg, _ = notifier.LoadConfig(path, env(nil))
	for _, s := range cfg.Sinks {
		if s.Type == notifier.SinkFlock && s.URL != "https://flock.example/y" {
			t.Errorf("flock url %q after the second add", s.URL)
		}
	}
	if code, _, stderr := runCmd(t, envm, "config", "add", "flock"); code != 2 || !strings.Contains(stderr, "give at least one") {
		t.Errorf("config add flock without flags: exit %d, %q", code, stderr)
	}
}

func TestResource_AddThenRemoveRoundTrips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kw.yaml")
	// An alias in the file is replaced, not doubled.
	if err := os.WriteFile(path, []byte("resource:\n  po: true\nhandler:\n  log: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func() []string {
		t.Helper()
		cfg, err := notifier.LoadConfig(path, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Resources
	}
	for _, step := range []struct {
		args []string
		want []string
	}{
		{[]string{"resource", "add", "--svc", "--hpa", "--event", "--sts", "--coreevent"}, []string{"coreevent", "event", "hpa", "pod", "services", "statefulset"}},
		{[]string{"resource", "remove", "--po", "--hpa"}, []string{"coreevent", "event", "services", "statefulset"}},
		{[]string{"resource", "add", "--po"}, []string{"coreevent", "event", "pod", "services", "statefulset"}},
		{[]string{"resource", "remove", "--svc", "--event", "--sts", "--coreevent"}, []string{"pod"}},
	} {
		if code, _, stderr := runCmd(t, nil, append(step.args, "--config", path)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", step.args, code, stderr)
		}
		if got := read(); !reflect.DeepEqual(got, step.want) {
			t.Errorf("after %v: resources %q, want %q", step.args, got, step.want)
		}
	}
}

func TestConfigTest_ExitsOneNamingTheSinkThatIsDown(t *testing.T) {
	var got []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = io.ReadAll(r.Body) }))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	down.Close()
	path := filepath.Join(t.TempDir(), "kw.yaml")
	doc := "resource: {pod: true}\nsinks:\n  - {name: up, type: webhook, url: '" + up.URL + "'}\n  - {name: down, type: webhook, url: '" + down.URL + "'}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, nil, "config", "test", "--config", path)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stdout, "sink up (webhook): ok") || !strings.Contains(stderr, "sink down (webhook): FAILED") ||
		!strings.Contains(stderr, "1 of 2 sinks failed: down") {
		t.Errorf("stdout %q\nstderr %q\nwant up ok and down named as failed", stdout, stderr)
	}
	var p map[string]any
	if err := json.Unmarshal(got, &p); err != nil {
		t.Fatalf("the up sink got %q: %v", got, err)
	}
	wantMeta := map[string]any{"kind": "testKind", "name": "testResource", "namespace": "testNamespace", "reason": "Tested"}
	if !reflect.DeepEqual(p["eventmeta"], wantMeta) {
		t.Errorf("eventmeta = %v, want kubewatch's test fields %v", p["eventmeta"], wantMeta)
	}
	// All sinks up: exit 0.
	doc = "resource: {pod: true}\nhandler: {webhook: {url: '" + up.URL + "'}}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCmd(t, nil, "config", "test", "--config", path); code != 0 {
		t.Errorf("all up: exit %d: %s", code, stderr)
	}
}
