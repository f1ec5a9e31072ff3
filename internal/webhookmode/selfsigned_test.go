package webhookmode_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/internal/webhookmode"
	"github.com/kloop-dev/kloop/webhook"
)

// The decision on the self-signed Secret, with no server: a missing,
// incomplete, mismatched, wrong-name, foreign-CA, expired or expiring
// Secret is replaced, saying why; a valid one is kept.
func TestCheckSecret_ReplacesMissingInvalidAndExpiringSecretsAndKeepsAValidOne(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	names := []string{"hooks.system.svc", "hooks.system.svc.cluster.local"}
	mk := func(t *testing.T, dns []string, at time.Time, validity time.Duration) map[string][]byte {
		t.Helper()
		d, err := webhookmode.MakeSecret(dns, at, validity)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{Type: corev1.SecretTypeTLS, Data: data}
	}
	valid := mk(t, names, now, webhookmode.SelfSignedValidity)
	without := func(key string) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range valid {
			if k != key {
				d[k] = v
			}
		}
		return d
	}
	other := mk(t, names, now, webhookmode.SelfSignedValidity)
	with := func(key string, v []byte) map[string][]byte {
		d := without(key)
		d[key] = v
		return d
	}

	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		want   string // in the reason; "" for valid
	}{
		{"missing", nil, "does not exist"},
		{"no ca.crt", secret(without("ca.crt")), "no ca.crt"},
		{"no tls.key", secret(without("tls.key")), "no tls.key"},
		{"key of another pair", secret(with("tls.key", other["tls.key"])), "tls.crt and tls.key"},
		{"ca.crt not PEM", secret(with("ca.crt", []byte("junk"))), "no PEM certificate"},
		{"signed by another CA", secret(with("ca.crt", other["ca.crt"])), "not valid for hooks.system.svc"},
		{"for another Service", secret(mk(t, []string{"other.system.svc", "other.system.svc.cluster.local"}, now, webhookmode.SelfSignedValidity)), "not valid for hooks.system.svc"},
		{"only the short name", secret(mk(t, names[:1], now, webhookmode.SelfSignedValidity)), "not valid for hooks.system.svc.cluster.local"},
		{"expired", secret(mk(t, names, now.Add(-48*time.Hour), 24*time.Hour)), "not valid for"},
		{"expiring within the renewal window", secret(mk(t, names, now, webhookmode.SelfSignedRenewBefore-time.Hour)), "ends at"},
		{"valid", secret(valid), ""},
		{"valid just outside the renewal window", secret(mk(t, names, now, webhookmode.SelfSignedRenewBefore+time.Hour)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhookmode.CheckSecret(tc.secret, names, now)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckSecret = %v, want nil (keep the Secret)", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckSecret = %v, want a reason containing %q", err, tc.want)
			}
		})
	}
}

// NewSelfSigned names the option that is missing.
func TestNewSelfSigned_NamesTheMissingOption(t *testing.T) {
	for _, tc := range []struct {
		opts webhookmode.SelfSignedOptions
		want string
	}{
		{webhookmode.SelfSignedOptions{Namespace: "ns", Secret: "s"}, "Service is empty"},
		{webhookmode.SelfSignedOptions{Service: "svc", Secret: "s"}, "Namespace is empty"},
		{webhookmode.SelfSignedOptions{Service: "svc", Namespace: "ns"}, "Secret is empty"},
	} {
		if _, err := webhookmode.NewSelfSigned(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSelfSigned(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	s, err := webhookmode.NewSelfSigned(webhookmode.SelfSignedOptions{Service: "svc", Namespace: "ns", Secret: "s", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.DNSNames(), ","); got != "svc.ns.svc,svc.ns.svc.cluster.local" {
		t.Errorf("DNSNames = %s, want svc.ns.svc,svc.ns.svc.cluster.local", got)
	}
	if _, err := webhook.NewServer(webhook.ServerOptions{CertDir: s.CertDir()}); err != nil {
		t.Errorf("NewServer on the prepared directory: %v, want the placeholder to load", err)
	}
}
