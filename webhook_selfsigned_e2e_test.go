package kloop_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/webhookmode"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/testenv"
)

// gadgetCRD converts through the Service "hooks" of the namespace NS. The
// API server cannot reach a Service here, so no gadget is ever made.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.selfsigned.kloop.dev
spec:
  group: selfsigned.kloop.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {name: hooks, namespace: NS, path: /convert}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// Two replicas with self-signed webhooks starting at once end with one
// Secret and serve its certificate, for the Service's names; the CA is set
// on the webhooks and the CRD conversion that call the Service and on no
// other. A Secret for other names is replaced at the next start, again by
// one of two replicas, and the caBundles follow; a valid one is kept.
// (The API server here cannot reach a Service in a cluster, so no call
// goes through it.)
func TestWebhook_SelfSignedReplicasAgreeOnOneSecretAndInjectTheCA(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ext := apiextensions.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	ns := testenv.NewNamespace(t, admin, "selfsigned")
	reg := admin.AdmissionregistrationV1()

	// Webhooks that match nothing: the Service cannot be reached.
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"never": ns}}
	ignore, none := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone
	svc := func(name, path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Path: &path}}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-mutating"}}
	for _, h := range []struct{ name, svc string }{{"ours.kloop.dev", "hooks"}, {"theirs.kloop.dev", "other"}} {
		mut.Webhooks = append(mut.Webhooks, admissionregistrationv1.MutatingWebhook{Name: h.name, ClientConfig: svc(h.svc, "/mutate"), Rules: rules,
			FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, ObjectSelector: never})
	}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "ours.kloop.dev", ClientConfig: svc("hooks", "/validate"), Rules: rules,
			FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, ObjectSelector: never}}}
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, mut, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ValidatingWebhookConfigurations().Create(ctx, val, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := manifest.InstallCRD(ctx, env.Config, []byte(strings.ReplaceAll(gadgetCRD, "NS", ns))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = reg.MutatingWebhookConfigurations().Delete(bg, mut.Name, metav1.DeleteOptions{})
		_ = reg.ValidatingWebhookConfigurations().Delete(bg, val.Name, metav1.DeleteOptions{})
		_ = ext.Delete(bg, "gadgets.selfsigned.kloop.dev", metav1.DeleteOptions{})
	})

	start := func(n int) (apps []*kloop.App, stop func()) {
		apps = make([]*kloop.App, n)
		for i := range apps {
			app, err := kloop.New(env.Config, kloop.Options{Name: ns, Namespace: ns, Logger: quiet(), WebhookAddr: "127.0.0.1:0",
				WebhookSelfSigned: &kloop.SelfSignedWebhooks{Service: "hooks", Namespace: ns, Secret: "hooks-cert"}})
			if err != nil {
				t.Fatal(err)
			}
			apps[i] = app
		}
		var stops []func()
		for _, app := range apps {
			stops = append(stops, startStoppable(t, app))
		}
		for _, app := range apps {
			testwait.Closed(t, "the self-signed webhook server to serve", app.WebhooksReady())
		}
		return apps, func() {
			for _, stop := range stops {
				stop()
			}
		}
	}
	names := []string{"hooks." + ns + ".svc", "hooks." + ns + ".svc.cluster.local"}

	// check: the Secret's certificate is what every app serves, for the
	// Service's names, and its CA is the caBundle of what calls the Service.
	check := func(apps []*kloop.App) *corev1.Secret {
		t.Helper()
		sec, err := admin.CoreV1().Secrets(ns).Get(ctx, "hooks-cert", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sec.Type != corev1.SecretTypeTLS {
			t.Errorf("Secret type %s, want %s", sec.Type, corev1.SecretTypeTLS)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
			t.Fatalf("Secret ca.crt %q holds no certificate", sec.Data["ca.crt"])
		}
		block, _ := pem.Decode(sec.Data["tls.crt"])
		if block == nil {
			t.Fatalf("Secret tls.crt %q holds no certificate", sec.Data["tls.crt"])
		}
		for i, app := range apps {
			for _, name := range names {
				conn, err := tls.Dial("tcp", app.WebhookServer().Addr(), &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12})
				if err != nil {
					t.Errorf("replica %d: TLS to %s as %s with the Secret's CA: %v", i, app.WebhookServer().Addr(), name, err)
					continue
				}
				served := conn.ConnectionState().PeerCertificates[0].Raw
				_ = conn.Close()
				if !bytes.Equal(served, block.Bytes) {
					t.Errorf("replica %d serves a certificate other than the Secret's tls.crt", i)
				}
			}
		}
		m, err := reg.MutatingWebhookConfigurations().Get(ctx, mut.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, sec.Data["ca.crt"]) {
			t.Errorf("mutating webhook of Service hooks: caBundle %q, want the Secret's ca.crt", got)
		}
		if got := m.Webhooks[1].ClientConfig.CABundle; len(got) != 0 {
			t.Errorf("mutating webhook of Service other: caBundle %q, want none (it calls another Service)", got)
		}
		v, err := reg.ValidatingWebhookConfigurations().Get(ctx, val.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, sec.Data["ca.crt"]) {
			t.Errorf("validating webhook: caBundle %q, want the Secret's ca.crt", got)
		}
		crd, err := ext.Get(ctx, "gadgets.selfsigned.kloop.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := crd.Spec.Conversion.Webhook.ClientConfig.CABundle; !bytes.Equal(got, sec.Data["ca.crt"]) {
			t.Errorf("CRD conversion: caBundle %q, want the Secret's ca.crt", got)
		}
		return sec
	}

	apps, stop := start(2)
	first := check(apps)
	stop()

	// A Secret for another Service is replaced by one of two replicas.
	other, err := webhookmode.NewLocal(webhookmode.LocalOptions{Host: "other." + ns + ".svc", Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	firstCA := first.Data["ca.crt"]
	first.Data = map[string][]byte{}
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if first.Data[f], err = os.ReadFile(filepath.Join(other.CertDir(), f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Secrets(ns).Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	apps, stop = start(2)
	second := check(apps)
	if bytes.Equal(second.Data["ca.crt"], firstCA) || bytes.Equal(second.Data["ca.crt"], other.CABundle()) {
		t.Error("the Secret for another Service was kept, want a new CA and certificate")
	}
	stop()

	// A valid Secret is kept as it is.
	apps, stop = start(1)
	if third := check(apps); third.ResourceVersion != second.ResourceVersion {
		t.Errorf("a start with a valid Secret wrote it (resourceVersion %s, was %s), want it kept", third.ResourceVersion, second.ResourceVersion)
	}
	stop()
}
