package notifier_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/notifier"
	"github.com/kloop-dev/kloop/kloopfake"
)

// TestKubewatchFiles_RunOrFailAsKubewatchWould takes each configuration
// file kubewatch ships (testdata/kubewatch) as a user switching would:
// the ones kubewatch runs with are accepted, with a warning for each key
// it ignores, and build a notifier; the others fail for the reason
// kubewatch fails at start, or, where kubewatch would start but could
// never send, for that reason, said.
func TestKubewatchFiles_RunOrFailAsKubewatchWould(t *testing.T) {
	type want struct {
		sinks    []string // the sinks' types, when it runs
		warnings []string // each in one warning
		err      string   // in the error, when it does not run
		why      string   // kubewatch's behaviour, for the reader
	}
	noHandler := "handler: no handler configured: notifications go to the log"
	cases := map[string]want{
		"examples/kubewatch.conf.crd.yaml":          {sinks: []string{"log"}, warnings: []string{noHandler}, why: "no handler: kubewatch's default handler logs"},
		"examples/kubewatch.conf.flock.yaml":        {sinks: []string{"flock"}},
		"examples/kubewatch.conf.hipchat.yaml":      {sinks: []string{"hipchat"}},
		"examples/kubewatch.conf.json":              {sinks: []string{"slack"}, warnings: []string{"reason: ignored, as kubewatch ignores it", "resource: nothing to watch"}, why: "kubewatch reads past reason: and watches nothing"},
		"examples/kubewatch.conf.lark.yaml":         {sinks: []string{"lark"}},
		"examples/kubewatch.conf.mattermost.yaml":   {err: "sink mattermost: url: want an http:// or https:// URL with a host", why: `kubewatch starts, then fails every post to "url of incoming webhook"`},
		"examples/kubewatch.conf.msteams.yaml":      {sinks: []string{"msteams"}},
		"examples/kubewatch.conf.slackwebhook.yaml": {sinks: []string{"log"}, warnings: []string{noHandler}, why: "every field empty: not configured, so the default handler"},
		"examples/kubewatch.conf.webhook.yaml":      {err: "sink webhook: cert: open /root/tls/ca.crt", why: "kubewatch's webhook handler fails to start on the missing cert file too"},
		"kubewatch-configmap.yaml":                  {sinks: []string{"slack"}},
		"chart/default.kubewatch.yaml":              {sinks: []string{"slack"}, why: "the chart's enabled: is read, not warned about"},
		"chart/slack.kubewatch.yaml":                {sinks: []string{"slack"}},
		"chart/slackwebhook.kubewatch.yaml":         {err: "sink slackwebhook: slackwebhookurl: want an http:// or https:// URL with a host", why: `kubewatch starts, then fails every post to "XXXX"`},
		"chart/smtp.kubewatch.yaml":                 {err: `handler.smtp.requireTLS: want true or false, got ""`, why: "kubewatch fails to read the chart's requireTLS: \"\" into a bool"},
	}
	for _, handler := range []string{"hipchat", "mattermost", "flock", "webhook", "cloudevent", "msteams", "lark"} {
		cases["chart/"+handler+".kubewatch.yaml"] = want{sinks: []string{"log"},
			warnings: []string{"handler." + handler + ": enabled, but none of its fields is set", noHandler},
			why:      "the chart's values are empty: kubewatch takes the handler as not configured and logs"}
	}
	var files []string
	err := filepath.WalkDir(filepath.Join("testdata", "kubewatch"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(cases) {
		t.Errorf("%d files in testdata/kubewatch, %d cases: give each file a case", len(files), len(cases))
	}
	noEnv := func(string) (string, bool) { return "", false }
	for _, path := range files {
		name := filepath.ToSlash(strings.TrimPrefix(path, filepath.Join("testdata", "kubewatch")+string(filepath.Separator)))
		w, ok := cases[name]
		if !ok {
			t.Errorf("%s: no case", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data = unwrapConfigMap(t, data)
			cfg, err := notifier.ParseConfig(data, noEnv)
			if err == nil {
				err = build(t, cfg)
			}
			if w.err != "" {
				if err == nil || !strings.Contains(err.Error(), w.err) {
					t.Fatalf("err = %v, want one saying %q (%s)", err, w.err, w.why)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v (%s)", err, w.why)
			}
			var sinks []string
			for _, s := range cfg.Sinks {
				sinks = append(sinks, s.Type)
			}
			if !slices.Equal(sinks, w.sinks) {
				t.Errorf("sinks %v, want %v", sinks, w.sinks)
			}
			for _, ww := range w.warnings {
				if !slices.ContainsFunc(cfg.Warnings, func(got string) bool { return strings.Contains(got, ww) }) {
					t.Errorf("no warning says %q; warnings:\n%s", ww, strings.Join(cfg.Warnings, "\n"))
				}
			}
			if len(cfg.Warnings) != len(w.warnings) {
				t.Errorf("warnings %q, want %d", cfg.Warnings, len(w.warnings))
			}
		})
	}
}

// unwrapConfigMap returns the .kubewatch.yaml of a ConfigMap, or data.
func unwrapConfigMap(t *testing.T, data []byte) []byte {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Kind != "ConfigMap" {
		return data
	}
	inner, ok := cm.Data[notifier.ConfigFileName]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cm.Name, notifier.ConfigFileName)
	}
	return []byte(inner)
}

// build makes a notifier of cfg on an App over an in-memory API server,
// as the notifier command does at start (its sinks' clients, certificates
// and templates), without running it.
func build(t *testing.T, cfg *notifier.Config) error {
	t.Helper()
	srv, err := kloopfake.NewServer(kloopfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "notifier", Namespace: cfg.Namespace, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = notifier.New(app, *cfg, notifier.Options{})
	return err
}
