package notifier

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
)

// All ten of kubewatch's handlers at once, each to a peer that parses
// what it gets as the service would. Every sink's template tries to leak
// the objects (old and new) into its text: a Secret's values must reach
// none of them.
func TestNotifier_AllTenHandlersGetEachChangeOnceAndNoSecretValue(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-ten")

	js := newJSONPeer(t)
	sl := newSlackPeer(t)
	ce := newCloudEventPeer(t)
	mail := newSMTPPeer(t, false, "PLAIN", "LOGIN")
	const leak = `{{.Reason}} {{.Kind}} {{.Name}} obj={{json .Object}} old={{json .OldObject}} labels={{json .Labels}}`
	sinks := []SinkConfig{
		{Type: SinkWebhook, URL: js.URL + "/webhook", IncludeObject: true, IncludeChanges: true},
		{Type: SinkSlackWebhook, URL: js.URL + "/slackwebhook", Channel: "#k8s"},
		{Type: SinkSlack, URL: sl.GetAPIURL(), Token: "xoxb-1", Channel: "C1"},
		{Type: SinkMSTeams, URL: js.URL + "/msteams"},
		{Type: SinkMattermost, URL: js.URL + "/mattermost", Channel: "ops", Username: "kw"},
		{Type: SinkFlock, URL: js.URL + "/flock"},
		{Type: SinkLark, URL: js.URL + "/lark"},
		{Type: SinkHipchat, URL: js.URL + "/hipchat", Token: "t", Room: "r"},
		{Type: SinkCloudEvent, URL: ce.URL},
		{Type: SinkSMTP, Cert: mail.CAFile, SMTP: SMTPConfig{To: "ops@example.com", From: "kw@example.com", Smarthost: mail.Addr,
			RequireTLS: true, Auth: SMTPAuth{Username: smtpUser, Password: smtpPassword}}},
	}
	for i := range sinks {
		sinks[i].Template = leak
	}
	inboxes := map[string]*inbox{
		SinkWebhook: js.box("/webhook"), SinkSlackWebhook: js.box("/slackwebhook"), SinkSlack: sl.box,
		SinkMSTeams: js.box("/msteams"), SinkMattermost: js.box("/mattermost"), SinkFlock: js.box("/flock"),
		SinkLark: js.box("/lark"), SinkHipchat: js.box("/hipchat/room/r/notification"), SinkCloudEvent: ce.box, SinkSMTP: mail.box,
	}

	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	n, err := New(newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: reg}), Config{Namespace: ns, Resources: []string{"configmap", "secret"}, Sinks: sinks},
		Options{})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)
	defer func() {
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()

	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ten-cm"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for typ, box := range inboxes {
		box.waitFor(t, typ, "Created ConfigMap ten-cm")
	}

	const v1, v2 = "hunter2-e2e", "hunter3-e2e"
	applied := `{"apiVersion":"v1","kind":"Secret","stringData":{"password":"` + v1 + `"}}`
	sec, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "ten-secret", Annotations: map[string]string{lastApplied: applied}},
		StringData: map[string]string{"password": v1},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.StringData = map[string]string{"password": v2}
	if _, err := kc.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for typ, box := range inboxes {
		box.waitFor(t, typ, "Updated Secret ten-secret")
	}
	stop()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}

	forbidden := []string{v1, v2}
	for _, v := range []string{v1, v2} {
		// The base64 of the value (data), without padding that an
		// encoding of the carrier (quoted-printable) would change.
		forbidden = append(forbidden, strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(v)), "=")[:12])
	}
	for typ, box := range inboxes {
		got := box.all()
		cms := 0
		for _, m := range got {
			if typ == SinkSMTP {
				// Decoded, as a reader sees it: quoted-printable may
				// break a value across lines.
				h, parts := readMail(t, m)
				m = fmt.Sprint(h) + "\n" + parts["text/plain"] + "\n" + parts["text/html"]
			}
			if strings.Contains(m, "ConfigMap ten-cm") {
				cms++
			}
			for _, f := range forbidden {
				if strings.Contains(m, f) {
					t.Errorf("%s: a secret value (%q) reached the handler:\n%s", typ, f, m)
				}
			}
		}
		if cms != 1 {
			t.Errorf("%s: the ConfigMap change arrived %d times, want exactly once:\n%s", typ, cms, strings.Join(got, "\n"))
		}
		if !strings.Contains(strings.Join(got, "\n"), "Created Secret ten-secret") {
			t.Errorf("%s: no create of the secret:\n%s", typ, strings.Join(got, "\n"))
		}
	}
}
