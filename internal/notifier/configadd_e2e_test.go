package notifier

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
)

// buildNotifier builds cmd/notifier into a temporary directory.
func buildNotifier(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		gocmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "notifier")
	if out, err := exec.Command(gocmd, "build", "-o", bin, "github.com/kloop-dev/kloop/cmd/notifier").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/notifier: %v\n%s", err, out)
	}
	return bin
}

// `config add <handler>` for each of the ten handlers, with the real
// binary: the file it writes is what `config view` prints, and the
// notifier run with that file (the binary, on the real control plane)
// takes one ConfigMap change to that handler's receiver, once.
func TestConfigAdd_EachHandlersFileRunsTheNotifierToItsReceiver(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "notifier-configadd")
	bin := buildNotifier(t)

	js := newJSONPeer(t)
	sl := newSlackPeer(t)
	ce := newCloudEventPeer(t)
	mail := newSMTPPeer(t, false, "PLAIN", "LOGIN")
	for _, h := range []struct {
		typ  string
		args []string
		box  *inbox
		view string // a value config view must print
	}{
		{SinkWebhook, []string{"-u", js.URL + "/webhook"}, js.box("/webhook"), js.URL + "/webhook"},
		{SinkSlackWebhook, []string{"-w", js.URL + "/slackwebhook", "-c", "#k8s", "-n", "kw"}, js.box("/slackwebhook"), js.URL + "/slackwebhook"},
		{SinkSlack, []string{"-t", "xoxb-1", "-c", "C1", "--apiurl", sl.GetAPIURL()}, sl.box, sl.GetAPIURL()},
		{SinkMSTeams, []string{"-w", js.URL + "/msteams"}, js.box("/msteams"), js.URL + "/msteams"},
		{SinkMattermost, []string{"-u", js.URL + "/mattermost", "-c", "ops", "-n", "kw"}, js.box("/mattermost"), js.URL + "/mattermost"},
		{SinkFlock, []string{"-u", js.URL + "/flock"}, js.box("/flock"), js.URL + "/flock"},
		{SinkLark, []string{"-u", js.URL + "/lark"}, js.box("/lark"), js.URL + "/lark"},
		{SinkHipchat, []string{"-r", "r", "-t", "hc-token", "-u", js.URL + "/hipchat"}, js.box("/hipchat/room/r/notification"), "hc-token"},
		{SinkCloudEvent, []string{"-u", ce.URL}, ce.box, ce.URL},
		{SinkSMTP, []string{"--to", "ops@example.com", "--from", "kw@example.com", "--smarthost", mail.Addr, "--requiretls",
			"--username", smtpUser, "--password", smtpPassword, "--cert", mail.CAFile}, mail.box, mail.Addr},
	} {
		t.Run(h.typ, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "kubewatch.yaml")
			// Only what the test gives: no KW_* of the caller's. The
			// checkpoint goes to a namespace of its own, so that no run
			// starts from another's.
			ckNS := testenv.NewNamespace(t, kc, "notifier-configadd-ck")
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "POD_NAMESPACE=" + ckNS}
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(bin, append(args, "--config", file)...)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("notifier %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			run(append([]string{"config", "add", h.typ}, h.args...)...)
			run("resource", "add", "--cm")
			written, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			viewed := run("config", "view")
			if viewed != string(written) || !strings.Contains(viewed, h.typ+":") || !strings.Contains(viewed, h.view) {
				t.Fatalf("config view printed:\n%s\nthe file holds:\n%s\nwant it, with %s and %q", viewed, written, h.typ, h.view)
			}

			cmd := exec.Command(bin, "--config", file, "--kubeconfig", e.KubeconfigPath, "--metrics-bind-address", "0")
			cmd.Env = env
			_, logs := reexec.Start(t, "notifier", cmd)
			logs.WaitFor(t, "the notifier synced", regexp.MustCompile(`Notifier synced`))

			name := "added-" + h.typ
			if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.box.waitFor(t, h.typ, name)
			// SIGTERM: a clean stop, after the drain.
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("notifier after SIGTERM: %v, want exit 0", err)
				}
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatal("the notifier did not exit within 60s of SIGTERM")
			}
			got := 0
			for _, m := range h.box.all() {
				if strings.Contains(m, name) {
					got++
				}
			}
			if got != 1 {
				t.Errorf("%s received the change %d times, want once:\n%s", h.typ, got, strings.Join(h.box.all(), "\n"))
			}
		})
	}
}
