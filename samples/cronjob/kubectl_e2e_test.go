package cronjob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/cronjob"
	"github.com/kloop-dev/kloop/testenv/await"
)

// kubectl runs kubectl on the harness's namespace with stdin, and returns
// its stdout and stderr.
func (h *harness) kubectl(stdin string, args ...string) (string, string, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", h.env.KubeconfigPath, "-n", h.ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// mustKubectl is kubectl that fails the test when kubectl fails.
func (h *harness) mustKubectl(stdin string, args ...string) (string, string) {
	h.t.Helper()
	out, errOut, err := h.kubectl(stdin, args...)
	if err != nil {
		h.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out, errOut
}

const jobTemplate = `
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: hello
            image: busybox
`

func v1CronJob(name, schedule, extra string) string {
	return "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata:\n  name: " + name +
		"\nspec:\n  schedule: \"" + schedule + "\"\n" + extra + jobTemplate
}

func TestCronJob_ThroughKubectlWithTheAppsWebhooksInLocalMode(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("needs kubectl on PATH")
	}
	h := newCluster(t)
	ready := make(chan (<-chan struct{}), 1)
	h.run(kloop.Options{Name: "cronjob-" + h.ns, WebhookLocal: true}, func(app *kloop.App) { ready <- app.WebhooksReady() })
	await.Closed(t, "the webhooks called by the API server", await.Receive(t, "the App's setup", ready))

	// The generated CRD directory applies as it is (client-side apply
	// keeps the whole CRD in an annotation, which must fit).
	if out, _ := h.mustKubectl("", "apply", "-f", "crd/"); !strings.Contains(out, "cronjobs.batch.tutorial.kubebuilder.io") {
		t.Errorf("kubectl apply -f crd/ printed %q, want the CRD named", out)
	}

	// The validator refuses a bad schedule, naming the field and saying why.
	_, errOut, err := h.kubectl(v1CronJob("bad", "every minute", ""), "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, "spec.schedule") || !strings.Contains(errOut, "not a cron schedule") || !strings.Contains(errOut, `"every minute"`) {
		t.Errorf("apply with schedule \"every minute\": %v, stderr %q; want the validator's refusal", err, errOut)
	}

	// The defaulter fills in what is left out; the validator warns.
	_, errOut = h.mustKubectl(v1CronJob("defaulted", "*/5 * * * *", ""), "apply", "-f", "-")
	if !strings.Contains(errOut, "Warning: "+cronjob.WarningNoStartingDeadline) {
		t.Errorf("kubectl apply printed %q, want the warning %q", errOut, cronjob.WarningNoStartingDeadline)
	}
	out, _ := h.mustKubectl("", "get", "cronjobs.v1.batch.tutorial.kubebuilder.io", "defaulted", "-o",
		"jsonpath={.spec.concurrencyPolicy} {.spec.suspend} {.spec.successfulJobsHistoryLimit} {.spec.failedJobsHistoryLimit}")
	if out != "Allow false 3 1" {
		t.Errorf("defaults: %q, want \"Allow false 3 1\"", out)
	}

	// An update that makes the schedule invalid is refused; the stored
	// CronJob is unchanged.
	_, errOut, err = h.kubectl(v1CronJob("defaulted", "every minute", ""), "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, "spec.schedule") {
		t.Errorf("update to schedule \"every minute\": %v, stderr %q; want a refusal", err, errOut)
	}
	if out, _ := h.mustKubectl("", "get", "cronjobs.v1.batch.tutorial.kubebuilder.io", "defaulted", "-o", "jsonpath={.spec.schedule}"); out != "*/5 * * * *" {
		t.Errorf("schedule after the refused update: %q, want \"*/5 * * * *\"", out)
	}

	// Written as v2: stored as v1 with the schedule joined, read back as v2
	// as written (every defaulted field given, so the defaulter has
	// nothing to add).
	v2Spec := `schedule:
  minute: "*/10"
  hour: "2"
startingDeadlineSeconds: 60
concurrencyPolicy: Forbid
suspend: true
successfulJobsHistoryLimit: 2
failedJobsHistoryLimit: 0
` + strings.ReplaceAll(strings.TrimPrefix(jobTemplate, "\n"), "\n  ", "\n")[2:]
	indented := "  " + strings.ReplaceAll(strings.TrimSuffix(v2Spec, "\n"), "\n", "\n  ") + "\n"
	_, errOut = h.mustKubectl("apiVersion: batch.tutorial.kubebuilder.io/v2\nkind: CronJob\nmetadata:\n  name: fields\nspec:\n"+indented, "apply", "-f", "-")
	if strings.Contains(errOut, "Warning") {
		t.Errorf("kubectl apply printed %q, want no warning", errOut)
	}
	if out, _ := h.mustKubectl("", "get", "cronjobs.v1.batch.tutorial.kubebuilder.io", "fields", "-o", "jsonpath={.spec.schedule}"); out != "*/10 2 * * *" {
		t.Errorf("v2 CronJob read as v1: schedule %q, want \"*/10 2 * * *\"", out)
	}
	out, _ = h.mustKubectl("", "get", "cronjobs.v2.batch.tutorial.kubebuilder.io", "fields", "-o", "json")
	var got struct {
		APIVersion string         `json:"apiVersion"`
		Spec       map[string]any `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(v2Spec), &want); err != nil {
		t.Fatal(err)
	}
	// Go's types write empty objects (metadata: {}, resources: {}) where
	// the YAML had none; they say nothing, so they do not count.
	if got.APIVersion != "batch.tutorial.kubebuilder.io/v2" || !reflect.DeepEqual(dropEmpty(got.Spec), dropEmpty(want)) {
		t.Errorf("v2 CronJob read back as %s:\n%v\nwant\n%v", got.APIVersion, got.Spec, want)
	}
	if out, _ := h.mustKubectl("", "get", "crd", "cronjobs.batch.tutorial.kubebuilder.io", "-o", "jsonpath={.status.storedVersions}"); out != `["v1"]` {
		t.Errorf("stored versions %s, want [\"v1\"]", out)
	}

	// Written as v1, read as v2: the fields of the schedule.
	h.mustKubectl(v1CronJob("string", "0 3 * * 1", "  startingDeadlineSeconds: 10\n"), "apply", "-f", "-")
	out, _ = h.mustKubectl("", "get", "cronjobs.v2.batch.tutorial.kubebuilder.io", "string", "-o", "jsonpath={.spec.schedule}")
	var sched map[string]string
	if err := json.Unmarshal([]byte(out), &sched); err != nil {
		t.Fatalf("v2 schedule %q: %v", out, err)
	}
	if want := map[string]string{"minute": "0", "hour": "3", "dayOfMonth": "*", "month": "*", "dayOfWeek": "1"}; !reflect.DeepEqual(sched, want) {
		t.Errorf("v1 \"0 3 * * 1\" read as v2: %v, want %v", sched, want)
	}
}

// dropEmpty returns v without the empty objects in it, at any depth.
func dropEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if m, ok := dropEmpty(e).(map[string]any); ok && len(m) == 0 {
				continue
			}
			out[k] = dropEmpty(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = dropEmpty(e)
		}
		return out
	}
	return v
}
