package notifier

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
)

func noEnv(string) (string, bool) { return "", false }

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseConfig_AcceptsKubewatchKeysAndTheirShortAliases(t *testing.T) {
	doc := `
namespace: web
resource:
  deployment: true
  rs: true
  svc: true
  po: true
  Ns: true
  configmap: false
  secret: true
customresources:
  - group: monitoring.coreos.com
    version: v1
    resource: prometheusrules
handler:
  webhook:
    url: http://127.0.0.1:9/hook
    tlsskip: "TRUE"
  slack: {token: "", channel: "", title: ""}
  msteams: {webhookurl: ""}
`
	cfg, err := ParseConfig([]byte(doc), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "web" {
		t.Errorf("Namespace = %q, want web", cfg.Namespace)
	}
	wantRes := []string{"deployment", "namespace", "pod", "replicaset", "secret", "services"}
	if !reflect.DeepEqual(cfg.Resources, wantRes) {
		t.Errorf("Resources = %q, want %q", cfg.Resources, wantRes)
	}
	wantCR := []CustomResource{{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}}
	if !reflect.DeepEqual(cfg.CustomResources, wantCR) {
		t.Errorf("CustomResources = %+v, want %+v", cfg.CustomResources, wantCR)
	}
	// The empty slack and msteams handlers are not configured, as in kubewatch.
	want := []SinkConfig{{Name: "webhook", Type: SinkWebhook, URL: "http://127.0.0.1:9/hook", TLSSkip: true, MaxAttempts: 5, QueueSize: 1000}}
	if !reflect.DeepEqual(cfg.Sinks, want) {
		t.Errorf("Sinks =\n%+v\nwant\n%+v", cfg.Sinks, want)
	}
}

func TestParseConfig_SeveralSinksWithFiltersAndUpdatePolicy(t *testing.T) {
	doc := `
resource: {pod: true, configmap: true}
updates: {ignoreStatusOnly: true, ignoremetadataonly: true}
handler:
  slackwebhook: {slackwebhookurl: "https://hooks.example/x", channel: "#k8s", username: kw, emoji: ":eyes:"}
  log: {}
sinks:
  - type: webhook
    name: audit
    url: http://127.0.0.1:1/a
    includeobject: true
    includechanges: true
    maxattempts: 3
    queuesize: 10
    filter:
      events: [Delete, update]
      namespaces: [a, b]
      excludeNamespaces: [kube-system]
      labelselector: "app=web,tier!=db"
      resources: [po, CM]
  - type: webhook
    url: http://127.0.0.1:1/b
`
	cfg, err := ParseConfig([]byte(doc), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Updates.IgnoreStatusOnly || !cfg.Updates.IgnoreMetadataOnly {
		t.Errorf("Updates = %+v, want both set", cfg.Updates)
	}
	want := []SinkConfig{
		{Name: "slackwebhook", Type: SinkSlackWebhook, URL: "https://hooks.example/x", Channel: "#k8s", Username: "kw", Emoji: ":eyes:", MaxAttempts: 5, QueueSize: 1000},
		{Name: "log", Type: SinkLog, Format: "text", MaxAttempts: 5, QueueSize: 1000},
		{Name: "audit", Type: SinkWebhook, URL: "http://127.0.0.1:1/a", IncludeObject: true, IncludeChanges: true, MaxAttempts: 3, QueueSize: 10, Filter: FilterConfig{
			Events: []EventType{Delete, Update}, Namespaces: []string{"a", "b"}, ExcludeNamespaces: []string{"kube-system"},
			LabelSelector: "app=web,tier!=db", Resources: []string{"po", "cm"},
		}},
		{Name: "webhook", Type: SinkWebhook, URL: "http://127.0.0.1:1/b", MaxAttempts: 5, QueueSize: 1000},
	}
	if !reflect.DeepEqual(cfg.Sinks, want) {
		t.Errorf("Sinks =\n%+v\nwant\n%+v", cfg.Sinks, want)
	}
}

func TestParseConfig_RejectsEachBadInputNamingTheKeyAndWhatIsAllowed(t *testing.T) {
	const ok = "resource: {pod: true}\nhandler: {log: {}}\n"
	cases := []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"not yaml", "resource: [", []string{"not YAML"}},
		{"alias and long name twice", "resource: {svc: true, services: false}\nhandler: {log: {}}", []string{"resource.svc: names the same resource as resource.services"}},
		{"resource not a bool", "resource: {pod: maybe}\nhandler: {log: {}}", []string{`resource.pod: want true or false, got "maybe"`}},
		{"resource not a mapping", "resource: [pod]\nhandler: {log: {}}", []string{"resource: want a mapping, got a list"}},
		{"namespace not a string", ok + "namespace: [a]\n", []string{"namespace: want a string, got a list"}},
		{"msteams card", ok + "handler: {log: {}, msteams: {webhookurl: 'https://x/', card: hero}}", []string{`sink msteams: card "hero"; allowed: messagecard, adaptive`}},
		{"mattermost incomplete", ok + "handler: {log: {}, mattermost: {url: 'https://x/'}}", []string{"sink mattermost: channel is required", "sink mattermost: username is required"}},
		{"slack incomplete", ok + "handler: {log: {}, slack: {channel: '#a'}}", []string{"sink slack: token is required for a slack sink"}},
		{"hipchat incomplete", ok + "handler: {log: {}, hipchat: {token: t}}", []string{"sink hipchat: room is required for a hipchat sink"}},
		{"smtp incomplete", ok + "handler: {log: {}, smtp: {to: a@b, smarthost: mail}}", []string{"sink smtp: from is required", `sink smtp: smarthost "mail": want host:port`}},
		{"bad template", ok + "handler: {log: {template: '{{.Kind'}}", []string{"sink log: template:"}},
		{"webhook url not http", "resource: {pod: true}\nhandler: {webhook: {url: 'ftp://h/x'}}", []string{"sink webhook: url: want an http:// or https:// URL with a host"}},
		{"slack url given twice", "resource: {pod: true}\nhandler: {slackwebhook: {url: http://a/, slackwebhookurl: http://b/}}", []string{"handler.slackwebhook.url: give slackwebhookurl or url, not both"}},
		{"bad event type", "resource: {pod: true}\nhandler: {log: {filter: {events: [created]}}}", []string{`handler.log.filter.events: "created"; allowed: create, update, delete`}},
		{"bad label selector", "resource: {pod: true}\nhandler: {log: {filter: {labelselector: 'a==='}}}", []string{"handler.log.filter.labelselector:"}},
		{"enabled not a bool", ok + "handler: {webhook: {url: 'http://h/', enabled: yes please}}", []string{`handler.webhook.enabled: want true or false, got "yes please"`}},
		{"checkpoint unknown key", ok + "checkpoint: {type: file, file: x}", []string{"checkpoint.file: unknown key; allowed: type, namespace, name, path, maxobjects"}},
		{"unknown filter key", "resource: {pod: true}\nhandler: {log: {filter: {names: [x]}}}", []string{"handler.log.filter.names: unknown key; allowed: events, namespaces, excludenamespaces, labelselector, resources"}},
		{"maxattempts zero", "resource: {pod: true}\nhandler: {log: {maxattempts: 0}}", []string{"handler.log.maxattempts: want a whole number of at least 1, got 0"}},
		{"queuesize fraction", "resource: {pod: true}\nhandler: {log: {queuesize: 1.5}}", []string{"handler.log.queuesize: want a whole number of at least 1, got 1.5"}},
		{"log format", "resource: {pod: true}\nhandler: {log: {format: xml}}", []string{`sink log: format "xml"; allowed: text, json`}},
		{"sink without type", ok + "sinks: [{url: http://h/}]", []string{"sinks[0].type: want one of slack, slackwebhook, hipchat, mattermost, flock, webhook, cloudevent, msteams, smtp, lark, log, got nothing"}},
		{"sink not a mapping", ok + "sinks: [log]", []string{`sinks[0]: want a mapping with a type (slack, slackwebhook, hipchat, mattermost, flock, webhook, cloudevent, msteams, smtp, lark, log), got "log"`}},
		{"sink key of another type", ok + "sinks: [{type: log, url: http://h/}]", []string{"sinks[0].url: unknown key; allowed: format, filter, maxattempts, queuesize, template, advancedfilter, incidents, name, type"}},
		{"sink names twice", "resource: {pod: true}\nsinks: [{type: log, name: a}, {type: log, name: a}]", []string{"sink a: name used twice"}},
		{"custom resource incomplete", ok + "customresources: [{group: x.io, resource: foos}]", []string{"customresources[0]: version and resource are required"}},
		{"updates unknown key", ok + "updates: {ignorestatus: true}", []string{"updates.ignorestatus: unknown key; allowed: ignorestatusonly, ignoremetadataonly"}},
		{"keys differing in case", "resource: {pod: true, Pod: true}\nhandler: {log: {}}", []string{"given twice (keys ignore case)"}},
		{"two problems at once", "resource: {pod: 1}\nhandler: {log: {format: 2}}", []string{"resource.pod: want true or false, got 1", "handler.log.format: want a string, got 2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc), noEnv)
			if err == nil {
				t.Fatalf("ParseConfig(%q) = nil error, want one containing %q", tc.doc, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestParseConfig_AcceptsWhatKubewatchIgnoresWithAWarningNamingIt: what
// kubewatch reads past (it decodes into structs and drops unknown keys) is
// accepted, each with a warning naming its key; the notifier logs them.
func TestParseConfig_AcceptsWhatKubewatchIgnoresWithAWarningNamingIt(t *testing.T) {
	const ok = "resource: {pod: true}\nhandler: {log: {}}\n"
	cases := []struct {
		name     string
		doc      string
		warnings []string // each in one warning
		sinks    []string // the sinks' names
	}{
		{"empty file", "", []string{"resource: nothing to watch", "pod (po, pods)", "handler: no handler configured: notifications go to the log", "slack, slackwebhook, hipchat, mattermost, flock, webhook, cloudevent, msteams, smtp, lark under handler:"}, []string{"log"}},
		{"unknown top-level key", ok + "reason: [Created]\n", []string{"reason: ignored, as kubewatch ignores it: not a key of this mapping (namespace, handler, resource"}, []string{"log"}},
		{"unknown resource", "resource: {pods: true, foo: true}\nhandler: {log: {}}", []string{"resource.foo: ignored, as kubewatch ignores it: not a resource; allowed:", "configmap (cm, configmaps)"}, []string{"log"}},
		{"unknown handler", "resource: {pod: true}\nhandler: {pagerduty: {url: x}}", []string{"handler.pagerduty: ignored, as kubewatch ignores it: not a key of this mapping (slack, slackwebhook, hipchat", "handler: no handler configured"}, []string{"log"}},
		{"unknown webhook key", "resource: {pod: true}\nhandler: {webhook: {url: http://h/, room: r}}", []string{"handler.webhook.room: ignored, as kubewatch ignores it: not a key of this mapping (url, cert, tlsskip, includeobject, includechanges, filter, maxattempts, queuesize, template, advancedfilter, incidents)"}, []string{"webhook"}},
		{"custom resource unknown key", ok + "customresources: [{version: v1, resource: foos, kind: Foo}]", []string{"customresources[0].kind: ignored, as kubewatch ignores it: not a key of this mapping (group, version, resource, clusterscoped)"}, []string{"log"}},
		{"the chart's enabled", "resource: {pod: true}\nhandler: {webhook: {enabled: true, url: http://h/}}", nil, []string{"webhook"}},
		{"enabled and nothing set", "resource: {pod: true}\nhandler: {webhook: {enabled: true, url: ''}}", []string{"handler.webhook: enabled, but none of its fields is set", "handler: no handler configured"}, []string{"log"}},
		{"enabled false", "resource: {pod: true}\nhandler: {webhook: {enabled: false, url: http://h/}, log: {}}", []string{"handler.webhook.enabled: false: the handler is off"}, []string{"log"}},
		{"empty handlers, as kubewatch's examples have them", "resource: {pod: true}\nhandler: {slack: {token: '', channel: ''}, flock: {url: ''}, webhook: {url: http://h/}}", nil, []string{"webhook"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.doc), noEnv)
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", tc.doc, err)
			}
			for _, w := range tc.warnings {
				if !slices.ContainsFunc(cfg.Warnings, func(got string) bool { return strings.Contains(got, w) }) {
					t.Errorf("no warning says %q; warnings:\n%s", w, strings.Join(cfg.Warnings, "\n"))
				}
			}
			if tc.warnings == nil && len(cfg.Warnings) > 0 {
				t.Errorf("warnings %q, want none", cfg.Warnings)
			}
			var names []string
			for _, s := range cfg.Sinks {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.sinks) {
				t.Errorf("sinks %v, want %v", names, tc.sinks)
			}
		})
	}
}

// The chart's layout with the URL from the environment, as deploy/notifier
// has it: configured, and no warning.
func TestParseConfig_EnabledHandlerFilledFromTheEnvironmentIsConfigured(t *testing.T) {
	doc := "resource: {pod: true}\nhandler: {Webhook: {enabled: true, url: ''}}\n"
	cfg, err := ParseConfig([]byte(doc), envOf(map[string]string{"KW_WEBHOOK_URL": "http://127.0.0.1:1/hook"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 1 || cfg.Sinks[0].URL != "http://127.0.0.1:1/hook" || len(cfg.Warnings) != 0 {
		t.Errorf("sinks %+v, warnings %q: want the webhook from the environment and no warning", cfg.Sinks, cfg.Warnings)
	}
	cfg, err = ParseConfig([]byte(doc), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 2 || !strings.Contains(cfg.Warnings[0], "handler.Webhook: enabled, but none of its fields is set, here or in the environment") {
		t.Errorf("without the environment, warnings %q: want the handler named, then the log standing in", cfg.Warnings)
	}
}

func TestParseConfig_EnvironmentTurnsResourcesOnAndFillsHandlers(t *testing.T) {
	doc := "resource: {configmap: true}\nhandler: {slackwebhook: {channel: '#from-file'}}\n"
	cfg, err := ParseConfig([]byte(doc), envOf(map[string]string{
		"KW_POD":               "true",
		"KW_SECRET":            "false", // toggles only turn things on
		"KW_WEBHOOK_URL":       "http://127.0.0.1:1/hook",
		"KW_SLACK_WEBHOOK_URL": "https://hooks.example/y",
		"KW_SLACK_CHANNEL":     "#from-env",
		"KW_SLACK_USERNAME":    "bot",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"configmap", "pod"}; !reflect.DeepEqual(cfg.Resources, want) {
		t.Errorf("Resources = %q, want %q", cfg.Resources, want)
	}
	want := []SinkConfig{
		{Name: "slackwebhook", Type: SinkSlackWebhook, URL: "https://hooks.example/y", Channel: "#from-file", Username: "bot", MaxAttempts: 5, QueueSize: 1000},
		{Name: "webhook", Type: SinkWebhook, URL: "http://127.0.0.1:1/hook", MaxAttempts: 5, QueueSize: 1000},
	}
	if !reflect.DeepEqual(cfg.Sinks, want) {
		t.Errorf("Sinks =\n%+v\nwant\n%+v", cfg.Sinks, want)
	}

	_, err = ParseConfig([]byte(doc), envOf(map[string]string{"KW_POD": "yes"}))
	if err == nil || !strings.Contains(err.Error(), `environment KW_POD="yes": want true or false`) {
		t.Errorf("KW_POD=yes: err = %v, want it named", err)
	}
}

func TestParseConfig_BareLogHandlerIsOn(t *testing.T) {
	cfg, err := ParseConfig([]byte("resource: {pod: true}\nhandler:\n  log:\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 1 || cfg.Sinks[0].Type != SinkLog || cfg.Sinks[0].Format != "text" {
		t.Errorf("Sinks = %+v, want one text log sink", cfg.Sinks)
	}
}

// The sample's comment says a handler whose fields are all empty is not
// configured: filling in one handler (or none) must be enough.
func TestParseConfig_SampleConfigParsesAsIsAndWithAnyOneHandlerFilledIn(t *testing.T) {
	for _, tc := range []struct {
		env   map[string]string
		sinks []string
	}{
		{nil, []string{SinkLog}},
		{map[string]string{"KW_SLACK_WEBHOOK_URL": "https://hooks.example/x"}, []string{SinkLog, SinkSlackWebhook}},
		{map[string]string{"KW_WEBHOOK_URL": "http://127.0.0.1:1/"}, []string{SinkLog, SinkWebhook}},
	} {
		cfg, err := ParseConfig([]byte(SampleConfig), envOf(tc.env))
		if err != nil {
			t.Errorf("env %v: %v", tc.env, err)
			continue
		}
		var got []string
		for _, s := range cfg.Sinks {
			got = append(got, s.Type)
			if s.Type == SinkWebhook && (s.IncludeObject || s.IncludeChanges) {
				t.Errorf("env %v: webhook with the object or the changes, want kubewatch's payload by default", tc.env)
			}
		}
		if !reflect.DeepEqual(got, tc.sinks) {
			t.Errorf("env %v: sinks %q, want %q", tc.env, got, tc.sinks)
		}
	}
}

func TestParseConfig_SampleConfigParses(t *testing.T) {
	cfg, err := ParseConfig([]byte(SampleConfig), envOf(map[string]string{"KW_WEBHOOK_URL": "http://127.0.0.1:1/"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"configmap", "pod"}; !reflect.DeepEqual(cfg.Resources, want) {
		t.Errorf("Resources = %q, want %q", cfg.Resources, want)
	}
	// log: {format: text} is configured (its fields are not all empty).
	if len(cfg.Sinks) != 2 || cfg.Sinks[0].Type != SinkLog || cfg.Sinks[1].Type != SinkWebhook {
		t.Errorf("Sinks = %+v, want the log sink and the webhook from the environment", cfg.Sinks)
	}
}

func TestLoadConfigAndDefaultConfigPath(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KW_CONFIG": dir, "HOME": "/nonexistent"}
	path := DefaultConfigPath(func(k string) string { return env[k] })
	if want := filepath.Join(dir, ".kubewatch.yaml"); path != want {
		t.Errorf("DefaultConfigPath = %q, want %q", path, want)
	}
	if got := DefaultConfigPath(func(k string) string { return map[string]string{"HOME": "/h"}[k] }); got != "/h/.kubewatch.yaml" {
		t.Errorf("DefaultConfigPath without KW_CONFIG = %q, want /h/.kubewatch.yaml", got)
	}
	if _, err := LoadConfig(path, noEnv); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadConfig of a missing file = %v, want ErrNotExist", err)
	}
	if err := os.WriteFile(path, []byte("resource: {pod: true}\nhandler: {log: {format: json}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sinks[0].Format != "json" {
		t.Errorf("format = %q, want json", cfg.Sinks[0].Format)
	}
	if err := os.WriteFile(path, []byte("resource: {pod: true}\nhandler: {webhook: {url: 'ftp://h/'}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path, noEnv); err == nil || !strings.HasPrefix(err.Error(), path+": config: sink webhook:") {
		t.Errorf("LoadConfig error = %v, want it to start with the path", err)
	}
}

func TestParseConfig_BadURLErrorDoesNotEchoTheURL(t *testing.T) {
	for _, u := range []string{"hooks.slack.com/services/T0/B0/XXXXSECRETXXXX", "ftp://h/XXXXSECRETXXXX", "http://h/%zzXXXXSECRETXXXX"} {
		_, err := ParseConfig([]byte("resource: {pod: true}\nhandler: {slackwebhook: {slackwebhookurl: '"+u+"'}}"), noEnv)
		if err == nil || !strings.Contains(err.Error(), "sink slackwebhook: slackwebhookurl: want an http:// or https:// URL with a host") {
			t.Errorf("url %q: err = %v, want it to name the key and what is allowed", u, err)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("url %q: the error repeats the URL: %v", u, err)
		}
	}
}

// Each entry registers a handler on the factory's shared informer, so a
// resource listed twice would notify every change twice.
func TestValidate_RejectsAResourceWatchedTwice(t *testing.T) {
	log := []SinkConfig{{Type: SinkLog}}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"built-in by name and alias", Config{Resources: []string{"pod", "po"}, Sinks: log},
			`resource.po: names the same resource as resource.pod`},
		{"custom resource twice", Config{CustomResources: []CustomResource{{Group: "x.io", Version: "v1", Resource: "foos"}, {Group: "x.io", Version: "v1", Resource: "foos"}}, Sinks: log},
			`customresources[1]: x.io/foos is already watched by customresources[0]`},
		{"custom resource in two versions", Config{CustomResources: []CustomResource{{Group: "x.io", Version: "v1", Resource: "foos"}, {Group: "x.io", Version: "v2", Resource: "foos"}}, Sinks: log},
			`customresources[1]: x.io/foos is already watched by customresources[0]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	doc := "resource: {pod: true}\nhandler: {log: {}}\ncustomresources: [{group: x.io, version: v1, resource: foos}, {group: x.io, version: v1, resource: foos}]\n"
	if _, err := ParseConfig([]byte(doc), noEnv); err == nil || !strings.Contains(err.Error(), "customresources[1]: x.io/foos is already watched by customresources[0]") {
		t.Errorf("ParseConfig of a custom resource listed twice = %v", err)
	}
}

// A sink whose filter names a resource that is not watched would get
// nothing of it, silently.
func TestValidate_FilterResourcesMustBeWatched(t *testing.T) {
	doc := `
resource: {pod: true, cm: true}
customresources: [{group: x.io, version: v1, resource: foos}]
handler:
  log: {filter: {resources: [po, ConfigMaps, foos]}}
sinks:
  - {type: log, name: typo, filter: {resources: [podz]}}
  - {type: log, name: unwatched, filter: {resources: [secret]}}
`
	_, err := ParseConfig([]byte(doc), noEnv)
	if err == nil {
		t.Fatal("ParseConfig = nil error, want the typo and the unwatched resource named")
	}
	for _, want := range []string{
		`sink typo: filter.resources: "podz" is not watched; watched: configmap, pod, foos`,
		`sink unwatched: filter.resources: "secret" is not watched; watched: configmap, pod, foos`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "sink log:") {
		t.Errorf("a filter of watched resources was rejected: %v", err)
	}
}

// A sink's queue is allocated up front: a huge queuesize must be an error,
// not gigabytes reserved at start (or a makechan panic in New).
func TestValidate_BoundsTheQueueSize(t *testing.T) {
	_, err := ParseConfig([]byte("resource: {pod: true}\nhandler: {log: {queuesize: 1000000000}}\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "sink log: queuesize 1000000000; allowed: 1 to 1000000") {
		t.Errorf("ParseConfig with queuesize 1e9 = %v, want the bound named", err)
	}
	cfg := Config{Resources: []string{"pod"}, Sinks: []SinkConfig{{Type: SinkLog, QueueSize: 1 << 62}}}
	if _, err := New(newApp(t, &rest.Config{Host: "http://127.0.0.1:1"}, kloop.Options{Registry: prometheus.NewRegistry()}), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "queuesize") {
		t.Errorf("New with queuesize 1<<62 = %v, want a queuesize error", err)
	}
	if _, err := ParseConfig([]byte("resource: {pod: true}\nhandler: {log: {queuesize: 1000000}}\n"), noEnv); err != nil {
		t.Errorf("queuesize 1000000: %v", err)
	}
}

// With namespace: set, no event comes from another namespace: a filter
// listing only others would silently pass nothing.
func TestValidate_FilterNamespacesMustBeWatched(t *testing.T) {
	doc := `
namespace: web
resource: {pod: true, node: true}
handler:
  log: {filter: {namespaces: [web, ""]}}
sinks:
  - {type: log, name: other, filter: {namespaces: [shop]}}
`
	_, err := ParseConfig([]byte(doc), noEnv)
	want := `sink other: filter.namespaces: "shop" is never seen: only namespace web is watched (and "" for cluster-scoped objects)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ParseConfig = %v, want an error containing %q", err, want)
	}
	if strings.Contains(err.Error(), "sink log:") {
		t.Errorf("a filter of the watched namespace was rejected: %v", err)
	}
}

func TestParseConfig_FilterOnACustomResourceNamedLikeABuiltIn(t *testing.T) {
	doc := "customresources: [{version: v1, resource: secrets}]\nhandler: {log: {filter: {resources: [secrets]}}}\n"
	if _, err := ParseConfig([]byte(doc), noEnv); err != nil {
		t.Errorf("a filter on the watched custom resource secrets: %v", err)
	}
}

// kubewatch selects a handler from the file only: one set through its
// environment variables alone ran the no-op handler instead.
func TestParseConfig_AHandlerSetOnlyThroughItsEnvironmentIsSelected(t *testing.T) {
	cfg, err := ParseConfig([]byte("resource: {pod: true}\nhandler: {smtp: {to: a@example.com, from: b@example.com, smarthost: 'mail:25'}}\n"), envOf(map[string]string{
		"KW_SLACK_TOKEN": "xoxb", "KW_SLACK_CHANNEL": "#c", "KW_SLACK_TITLE": "prod",
		"KW_HIPCHAT_TOKEN": "ht", "KW_HIPCHAT_ROOM": "room", "KW_HIPCHAT_URL": "https://hipchat.example/v2",
		"KW_MATTERMOST_URL": "https://mm.example/hooks/x", "KW_MATTERMOST_CHANNEL": "ops", "KW_MATTERMOST_USERNAME": "kw",
		"KW_FLOCK_URL": "https://flock.example/x", "KW_CLOUDEVENT_URL": "https://ce.example/",
		"KW_MSTEAMS_WEBHOOKURL": "https://teams.example/x", "KW_LARK_WEBHOOK_URL": "https://lark.example/x",
		"ADVANCED_FILTERS": "true", "KUBEWATCH_NAME": "prod-eu",
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SinkConfig{}
	for _, s := range cfg.Sinks {
		got[s.Type] = s
	}
	for _, w := range []SinkConfig{
		{Name: "slack", Type: SinkSlack, Token: "xoxb", Channel: "#c", Title: "prod"},
		{Name: "hipchat", Type: SinkHipchat, Token: "ht", Room: "room", URL: "https://hipchat.example/v2"},
		{Name: "mattermost", Type: SinkMattermost, URL: "https://mm.example/hooks/x", Channel: "ops", Username: "kw"},
		{Name: "flock", Type: SinkFlock, URL: "https://flock.example/x"},
		{Name: "cloudevent", Type: SinkCloudEvent, URL: "https://ce.example/", AdvancedFilter: true},
		{Name: "msteams", Type: SinkMSTeams, URL: "https://teams.example/x", Card: CardMessageCard},
		{Name: "lark", Type: SinkLark, URL: "https://lark.example/x"},
		{Name: "smtp", Type: SinkSMTP, SMTP: SMTPConfig{To: "a@example.com", From: "b@example.com", Smarthost: "mail:25"}},
	} {
		w.MaxAttempts, w.QueueSize = DefaultMaxAttempts, DefaultQueueSize
		if !reflect.DeepEqual(got[w.Type], w) {
			t.Errorf("%s sink =\n%+v\nwant\n%+v", w.Type, got[w.Type], w)
		}
	}
	if len(cfg.Sinks) != 8 {
		t.Errorf("%d sinks, want 8", len(cfg.Sinks))
	}
	if cfg.ClusterName != "prod-eu" {
		t.Errorf("ClusterName = %q, want KUBEWATCH_NAME's", cfg.ClusterName)
	}
	// A cloudevent sink that sets advancedfilter itself keeps it.
	cfg, err = ParseConfig([]byte("resource: {pod: true}\nhandler: {cloudevent: {url: 'https://ce.example/', advancedfilter: false}}\n"), envOf(map[string]string{"ADVANCED_FILTERS": "true"}))
	if err != nil || cfg.Sinks[0].AdvancedFilter {
		t.Errorf("explicit advancedfilter: false under ADVANCED_FILTERS=true: %+v, %v", cfg.Sinks, err)
	}
}
