package kloop_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

var configmaps = corev1.SchemeGroupVersion.WithResource("configmaps")

func TestNew_AWebhookAddressWithoutCertificatesSaysWhatToAdd(t *testing.T) {
	_, err := kloop.New(unreachable, kloop.Options{Logger: quiet(), WebhookAddr: ":9443"})
	if err == nil || !strings.Contains(err.Error(), "--webhook-cert-dir") || !strings.Contains(err.Error(), "--webhook-local") {
		t.Fatalf("New = %v, want an error naming --webhook-cert-dir and --webhook-local", err)
	}
	_, err = kloop.New(unreachable, kloop.Options{Logger: quiet(), WebhookAddr: ":9443", WebhookCertDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Fatalf("New with an empty certificate directory = %v, want an error naming tls.crt", err)
	}
}

func TestNew_SelfSignedWebhooksSayWhatIsMissing(t *testing.T) {
	self := &kloop.SelfSignedWebhooks{Namespace: "system"}
	for _, tc := range []struct {
		name string
		opts kloop.Options
		want string
	}{
		{"no address", kloop.Options{WebhookSelfSigned: self}, "WebhookSelfSigned needs WebhookAddr"},
		{"with local mode", kloop.Options{WebhookSelfSigned: self, WebhookLocal: true}, "give one"},
		{"no namespace outside a cluster", kloop.Options{WebhookSelfSigned: &kloop.SelfSignedWebhooks{}, WebhookAddr: ":9443"}, "--webhook-service-namespace"},
	} {
		tc.opts.Logger = quiet()
		if _, err := kloop.New(unreachable, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	app, err := kloop.New(unreachable, kloop.Options{Logger: quiet(), WebhookSelfSigned: self, WebhookAddr: ":9443", WebhookCertDir: t.TempDir()})
	if err != nil {
		t.Fatalf("New with an address and a namespace = %v, want it made (nothing is read from the API server before Run)", err)
	}
	if app.WebhookServer() == nil {
		t.Error("WebhookServer = nil, want the self-signed server")
	}
}

func TestNewWebhook_MistakesAreReturnedByCompleteAndRun(t *testing.T) {
	noop := func(context.Context, *corev1.ConfigMap) error { return nil }
	t.Run("no webhook server", func(t *testing.T) {
		app := newApp(t, kloop.Options{})
		cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configmaps})
		if err := kloop.NewWebhook(app, cms).Defaulter(noop).Complete(); err == nil || !strings.Contains(err.Error(), "WebhookAddr") {
			t.Errorf("Complete = %v, want an error naming WebhookAddr", err)
		}
		if err := app.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "serves no webhooks") {
			t.Errorf("Run = %v, want the declaration error", err)
		}
	})
	local := kloop.Options{WebhookLocal: true}
	for _, tc := range []struct {
		name    string
		declare func(app *kloop.App) error
		want    string
	}{
		{"nothing to serve", func(app *kloop.App) error {
			return kloop.NewWebhook(app, kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configmaps})).Complete()
		}, "nothing to serve"},
		{"a kind declared twice", func(app *kloop.App) error {
			cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configmaps})
			if err := kloop.NewWebhook(app, cms).Defaulter(noop).Complete(); err != nil {
				return nil // not the mistake under test: the test fails on the missing error
			}
			return kloop.NewWebhook(app, cms).Defaulter(noop).Complete()
		}, "/mutate--v1-configmap already"},
		{"conversion of a built-in kind", func(app *kloop.App) error {
			return kloop.NewWebhook(app, kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configmaps})).Conversion().Complete()
		}, "built-in kind"},
		{"conversion without a Hub", func(app *kloop.App) error {
			foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.SchemeGroupVersion.WithResource("foos")})
			return kloop.NewWebhook(app, foos).Conversion().Complete()
		}, "kind " + schema.GroupKind{Group: v1alpha1.SchemeGroupVersion.Group, Kind: "Foo"}.String() + " has no Hub version in the scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := local
			opts.WebhookCertDir = t.TempDir()
			opts.Scheme = kloop.NewScheme(v1alpha1.AddToScheme)
			app := newApp(t, opts)
			if err := tc.declare(app); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Complete = %v, want an error containing %q", err, tc.want)
			}
			if err := app.Run(t.Context()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v, want the declaration error containing %q", err, tc.want)
			}
		})
	}
}
