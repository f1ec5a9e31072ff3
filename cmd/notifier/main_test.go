package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop/internal/notifier"
	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) {
	// Re-executed by a test: behave as the notifier command itself.
	reexec.Main(func(args []string) int {
		os.Args = append([]string{"notifier"}, args...)
		main()
		return 0
	})
	controlPlane.Main(m)
}

// hook records the webhook payloads it receives as "Reason Kind name".
type hook struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p struct {
		EventMeta struct{ Kind, Name, Reason string } `json:"eventmeta"`
	}
	_ = json.NewDecoder(r.Body).Decode(&p)
	h.mu.Lock()
	h.got = append(h.got, p.EventMeta.Reason+" "+p.EventMeta.Kind+" "+p.EventMeta.Name)
	close(h.more)
	h.more = make(chan struct{})
	h.mu.Unlock()
}

func (h *hook) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		h.mu.Lock()
		for _, g := range h.got {
			if g == want {
				h.mu.Unlock()
				return
			}
		}
		more := h.more
		h.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("webhook got no %q within 60s; got %q", want, h.all())
		}
	}
}

func (h *hook) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func TestNotifier_BinaryNotifiesFromItsConfigFileAndExitsZeroOnSIGTERM(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-cmd")
	cms := kc.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &hook{more: make(chan struct{})}
	srv := httptest.NewServer(h)
	defer srv.Close()

	config := filepath.Join(t.TempDir(), "kubewatch.yaml")
	doc := "namespace: " + ns + "\nresource:\n  cm: true\nhandler:\n  webhook:\n    url: " + srv.URL + "/hook\n  log: {}\n"
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := reexec.Command(context.Background(), "--config", config, "--kubeconfig", e.KubeconfigPath, "--metrics-bind-address", "127.0.0.1:0")
	out, logs := reexec.Start(t, "notifier", cmd)
	logs.WaitFor(t, "the synced log", regexp.MustCompile(`Notifier synced`))

	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1"}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "Created ConfigMap c1")
	cm.Data["k"] = "v2"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "Updated ConfigMap c1")
	if err := cms.Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "Deleted ConfigMap c1")
	out.WaitFor(t, "the log sink's delete line", regexp.MustCompile(`Deleted ConfigMap `+ns+`/c1$`))

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out.WaitEOF(t)
	logs.WaitEOF(t)
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Errorf("notifier exited with status %d after SIGTERM, want 0", exitErr.ExitCode())
	} else if err != nil {
		t.Errorf("notifier: %v", err)
	}

	if got, want := strings.Join(h.all(), "\n"), "Created ConfigMap c1\nUpdated ConfigMap c1\nDeleted ConfigMap c1"; got != want {
		t.Errorf("webhook received:\n%s\nwant exactly:\n%s", got, want)
	}
	lines := out.All()
	wantLines := []string{" Created ConfigMap " + ns + "/c1", " Updated ConfigMap " + ns + "/c1 changes=data.k", " Deleted ConfigMap " + ns + "/c1"}
	if len(lines) != len(wantLines) {
		t.Fatalf("stdout:\n%s\nwant %d lines", strings.Join(lines, "\n"), len(wantLines))
	}
	for i, w := range wantLines {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("stdout line %d = %q, want it to end %q", i, lines[i], w)
		}
	}
	logs.WaitFor(t, "the stop log", regexp.MustCompile(`Notifier stopped`))
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigSample_PrintsAConfigThatParses(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"config", "sample"}, &stdout, &stderr, env(nil)); code != 0 {
		t.Fatalf("config sample exited %d: %s", code, stderr.String())
	}
	if _, err := notifier.ParseConfig([]byte(stdout.String()), env(nil)); err != nil {
		t.Errorf("the sample does not parse: %v", err)
	}
}

func TestConfigCheck_ReportsTheBadKeyOrTheSummary(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("resource: {pods: maybe, svc: true}\nhandler: {log: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"config", "check", "--config", bad}, &stdout, &stderr, env(nil)); code != 1 {
		t.Errorf("check of a bad config exited %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), `resource.pods: want true or false, got "maybe"`) {
		t.Errorf("stderr %q does not name the bad key", stderr.String())
	}

	good := filepath.Join(dir, ".kubewatch.yaml")
	// The Helm chart's enabled: is read; reason: is one of the keys kubewatch
	// ignores, accepted with a warning.
	if err := os.WriteFile(good, []byte("resource: {po: true}\nhandler: {slackwebhook: {enabled: true, slackwebhookurl: 'https://hooks.example/services/SECRET'}}\nreason: [Created]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	// Found through KW_CONFIG, as kubewatch looks it up.
	if code := run(context.Background(), []string{"config", "check"}, &stdout, &stderr, env(map[string]string{"KW_CONFIG": dir})); code != 0 {
		t.Fatalf("check exited %d: %s", code, stderr.String())
	}
	want := "namespace: (all)\nresources: pod\nsink slackwebhook: slackwebhook https://hooks.example/... (max 5 attempts, queue 1000)\n" +
		"warning: reason: ignored, as kubewatch ignores it: not a key of this mapping (namespace, handler, resource, customresources, updates, sinks, clustername, checkpoint, incidents, silences)\n"
	if stdout.String() != want {
		t.Errorf("check printed:\n%s\nwant:\n%s", stdout.String(), want)
	}

	// Incidents, routes and silences are shown.
	if err := os.WriteFile(good, []byte(`resource: {po: true}
incidents: {window: 2m, groupbyowner: true, loglines: 20}
silences: {times: [{from: "22:00", to: "06:00", timezone: Europe/Berlin, namespaces: [batch]}]}
sinks:
  - {name: ops, type: webhook, url: "https://ops.example/", incidents: true, filter: {namespaces: [prod], severity: failed}}
  - {name: mail, type: smtp, to: a@example.com, from: b@example.com, smarthost: "mail.example.com:587", incidents: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"config", "check"}, &stdout, &stderr, env(map[string]string{"KW_CONFIG": dir})); code != 0 {
		t.Fatalf("check exited %d: %s", code, stderr.String())
	}
	for _, line := range []string{
		"route ops: namespaces prod; severity at least failed; incidents, every change\n",
		"route mail: every change; incidents, open and resolved only\n",
		"incidents: resolved 2m0s after the last change once healthy; grouped by owner; last 20 log lines of a failed container\n",
		"silence: annotation or label notifier.kloop.dev/silence-until on an object, its namespace or its owner (when the owner's kind is watched)\n",
		"silence: quiet time 22:00 to 06:00 Europe/Berlin in batch\n",
	} {
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("check lacks %q:\n%s", line, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "SECRET") {
		t.Error("check printed the webhook URL's secret path")
	}
}

func TestRun_MissingDefaultConfigExitsOneWithAHint(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	code := run(context.Background(), []string{"--metrics-bind-address", "0"}, io.Discard, &stderr, env(map[string]string{"KW_CONFIG": dir}))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "notifier config sample > "+filepath.Join(dir, ".kubewatch.yaml")) {
		t.Errorf("stderr lacks the hint:\n%s", stderr.String())
	}
}

func TestRun_BadFlagsAndEnvironment(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{[]string{"--help"}, nil, 0, "--kubeconfig"},
		{[]string{"--nope"}, nil, 2, "unknown flag: --nope"},
		{[]string{"extra"}, nil, 2, `unknown command "extra" for "notifier"`},
		{[]string{"--drain-timeout", "0s"}, nil, 2, `--drain-timeout "0s": want a positive duration`},
		{[]string{"--metrics-cert-dir=/etc/certs"}, nil, 2, "--metrics-cert-dir"},
		{[]string{"--debug-bind-address", "0.0.0.0:8082"}, nil, 2, "--debug-bind-address"},
		{[]string{"--drain-timeout", "-5s"}, nil, 2, `--drain-timeout "-5s": want a positive duration`},
		{[]string{"config"}, nil, 2, "give a subcommand: notifier config add <handler> | view | sample | test | check | rbac"},
		{[]string{"config", "edit"}, nil, 2, `unknown command "edit" for "notifier config"`},
		{nil, map[string]string{"LOG_LEVEL": "loud"}, 2, `LOG_LEVEL="loud"`},
		{nil, map[string]string{"LOG_FORMATTER": "xml"}, 2, `LOG_FORMATTER="xml"`},
	} {
		var stderr strings.Builder // and stdout, where --help goes
		if code := run(context.Background(), tc.args, &stderr, &stderr, env(tc.env)); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q, env %v) = %d, stderr %q; want %d and %q", tc.args, tc.env, code, stderr.String(), tc.code, tc.want)
		}
	}
}

func TestConfigRBAC_PrintsTheReadOnlyClusterRoleOfTheConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kw.yaml")
	if err := os.WriteFile(path, []byte("resource: {po: true, deploy: true}\nhandler: {log: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"config", "rbac", "--config", path, "--name", "watcher"}, &stdout, &stderr, env(nil)); code != 0 {
		t.Fatalf("config rbac exited %d: %s", code, stderr.String())
	}
	docs := strings.Split(stdout.String(), "\n---\n")
	if len(docs) != 3 { // the comment, the ClusterRole, the checkpoint's Role
		t.Fatalf("want a ClusterRole and a Role, got:\n%s", stdout.String())
	}
	var cp rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &cp); err != nil || cp.Name != "watcher-checkpoint" || len(cp.Rules) != 2 ||
		!reflect.DeepEqual(cp.Rules[0].ResourceNames, []string{notifier.DefaultCheckpointName}) {
		t.Errorf("checkpoint Role %+v (%v): want watcher-checkpoint with get/update on %s and create", cp, err, notifier.DefaultCheckpointName)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &role); err != nil {
		t.Fatalf("output is not a ClusterRole: %v\n%s", err, stdout.String())
	}
	rw := []string{"list", "watch"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: rw},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: rw},
	}
	if role.Kind != "ClusterRole" || role.Name != "watcher" || !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("got %s %q with rules %+v, want ClusterRole \"watcher\" with %+v", role.Kind, role.Name, role.Rules, want)
	}
}
