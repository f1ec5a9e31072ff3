package deploy_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
	"github.com/kloop-dev/kloop/webhook"
)

const (
	cronJobWebhookService = "cronjob-controller-webhook-service"
	cronJobCRD            = "cronjobs.batch.tutorial.kubebuilder.io"
)

// flagValue is the value of --name=value in args ("" when absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// cronJobWebhooks checks what both webhook overlays share: the generated
// configurations and the CRD's conversion call the webhook Service at the
// paths the controller serves, and the Service sends port 443 to the
// container's webhook port, where the container listens. It returns the
// Deployment and its container.
func cronJobWebhooks(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	wantService := func(what string, ns, name string) {
		if ns != cronJobNS || name != cronJobWebhookService {
			t.Errorf("%s calls Service %s/%s, want %s/%s", what, ns, name, cronJobNS, cronJobWebhookService)
		}
	}
	mut := as[admissionregistrationv1.MutatingWebhookConfiguration](t, find(t, objs, "MutatingWebhookConfiguration", "cronjob-controller-mutating"))
	val := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, objs, "ValidatingWebhookConfiguration", "cronjob-controller-validating"))
	if len(mut.Webhooks) != 1 || len(val.Webhooks) != 1 {
		t.Fatalf("%d mutating and %d validating webhooks, want 1 each", len(mut.Webhooks), len(val.Webhooks))
	}
	for _, h := range []struct {
		what string
		cc   admissionregistrationv1.WebhookClientConfig
		path string
	}{
		{"the mutating webhook", mut.Webhooks[0].ClientConfig, webhook.MutatePath(batch.Kind)},
		{"the validating webhook", val.Webhooks[0].ClientConfig, webhook.ValidatePath(batch.Kind)},
	} {
		if h.cc.Service == nil || h.cc.URL != nil {
			t.Errorf("%s: clientConfig %+v, want a Service", h.what, h.cc)
			continue
		}
		wantService(h.what, h.cc.Service.Namespace, h.cc.Service.Name)
		if h.cc.Service.Path == nil || *h.cc.Service.Path != h.path {
			t.Errorf("%s: path %v, want %s", h.what, h.cc.Service.Path, h.path)
		}
		if h.cc.Service.Port != nil && *h.cc.Service.Port != 443 {
			t.Errorf("%s: port %d, want 443", h.what, *h.cc.Service.Port)
		}
		if len(h.cc.CABundle) > 0 {
			t.Errorf("%s: a caBundle in the manifests; want it injected in the cluster", h.what)
		}
	}
	crd := as[apiextensionsv1.CustomResourceDefinition](t, find(t, objs, "CustomResourceDefinition", cronJobCRD))
	if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil ||
		c.Webhook.ClientConfig.Service == nil || !slices.Equal(c.Webhook.ConversionReviewVersions, []string{"v1"}) {
		t.Fatalf("CRD conversion %+v, want strategy Webhook through a Service with conversionReviewVersions [v1]", c)
	} else {
		s := c.Webhook.ClientConfig.Service
		wantService("the CRD conversion", s.Namespace, s.Name)
		if s.Path == nil || *s.Path != webhook.ConvertPath {
			t.Errorf("the CRD conversion: path %v, want %s", s.Path, webhook.ConvertPath)
		}
	}

	d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "cronjob-controller"))
	c := d.Spec.Template.Spec.Containers[0]
	svc := as[corev1.Service](t, find(t, objs, "Service", cronJobWebhookService))
	if svc.Namespace != cronJobNS || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("webhook Service %s/%s selects %v, want the Deployment's pods (%v) in %s", svc.Namespace, svc.Name, svc.Spec.Selector, d.Spec.Template.Labels, cronJobNS)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "webhook" {
		t.Errorf("webhook Service ports %+v, want 443 to the container's port webhook", svc.Spec.Ports)
	}
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" })
	if i < 0 {
		t.Fatalf("container ports %+v, want one named webhook", c.Ports)
	}
	if got, want := flagValue(c.Args, "webhook-bind-address"), ":"+strconv.Itoa(int(c.Ports[i].ContainerPort)); got != want {
		t.Errorf("--webhook-bind-address=%q, want %q (the container's webhook port)", got, want)
	}
	return d, c
}

// mountOf is the volume mounted at dir in c, nil when none is.
func mountOf(t *testing.T, d *appsv1.Deployment, c corev1.Container, dir string) *corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			for i, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name {
					return &d.Spec.Template.Spec.Volumes[i]
				}
			}
		}
	}
	return nil
}

// The base serves no webhooks: without a certificate the API server
// could not call them, and failurePolicy Fail would refuse every CronJob.
func TestCronJobBase_HasNoWebhooks(t *testing.T) {
	objs := render(t, "cronjob-controller")
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if got := ofKind(objs, kind); len(got) > 0 {
			t.Errorf("the base renders %s %s; want the webhooks in the overlays only", kind, got[0].GetName())
		}
	}
	crd := as[apiextensionsv1.CustomResourceDefinition](t, find(t, objs, "CustomResourceDefinition", cronJobCRD))
	if c := crd.Spec.Conversion; c != nil && c.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("the base's CRD converts by %s, want None", c.Strategy)
	}
}

// With cert-manager: the Certificate for the Service's names fills the
// Secret the Deployment mounts at --webhook-cert-dir, and cert-manager's
// CA injector is asked (inject-ca-from) to set the caBundle of both
// configurations and of the CRD's conversion from that Certificate.
func TestCronJobCertManagerOverlay_WiresTheCertificateToTheServerAndTheCABundles(t *testing.T) {
	objs := render(t, "overlays/cronjob-controller-cert-manager")
	d, c := cronJobWebhooks(t, objs)
	cert := find(t, objs, "Certificate", "cronjob-controller-serving-cert")
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	svcName := cronJobWebhookService + "." + cronJobNS + ".svc"
	if !slices.Contains(dns, svcName) || !slices.Contains(dns, svcName+".cluster.local") {
		t.Errorf("Certificate dnsNames %q, want %s and %s.cluster.local", dns, svcName, svcName)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	find(t, objs, "Issuer", issuer)
	dir := flagValue(c.Args, "webhook-cert-dir")
	if v := mountOf(t, d, c, dir); dir == "" || v == nil || v.Secret == nil || v.Secret.SecretName != secret {
		t.Errorf("--webhook-cert-dir=%q mounts %+v, want the Certificate's Secret %s", dir, v, secret)
	}
	want := cronJobNS + "/" + cert.GetName()
	for _, o := range []*unstructured.Unstructured{
		find(t, objs, "MutatingWebhookConfiguration", "cronjob-controller-mutating"),
		find(t, objs, "ValidatingWebhookConfiguration", "cronjob-controller-validating"),
		find(t, objs, "CustomResourceDefinition", cronJobCRD),
	} {
		if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
			t.Errorf("%s: cert-manager.io/inject-ca-from %q, want %q", describe(o), got, want)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--webhook-self-signed-secret") }) {
		t.Errorf("args %q: the self-signed Secret as well as cert-manager's", c.Args)
	}
}

// Without cert-manager: the controller is told its Secret and Service,
// writes the certificate to a writable emptyDir at --webhook-cert-dir, and
// has exactly the rights package webhook's SelfSigned uses (the Secret in
// its namespace; patch on the configurations and CRDs for the caBundle).
func TestCronJobSelfSignedOverlay_NamesTheSecretAndServiceAndGrantsWhatTheyNeed(t *testing.T) {
	objs := render(t, "overlays/cronjob-controller-self-signed")
	d, c := cronJobWebhooks(t, objs)
	if got := flagValue(c.Args, "webhook-self-signed-secret"); got == "" {
		t.Errorf("args %q, want --webhook-self-signed-secret", c.Args)
	}
	if got := flagValue(c.Args, "webhook-service"); got != cronJobWebhookService {
		t.Errorf("--webhook-service=%q, want %s (the Service the configurations call)", got, cronJobWebhookService)
	}
	dir := flagValue(c.Args, "webhook-cert-dir")
	if v := mountOf(t, d, c, dir); dir == "" || v == nil || v.EmptyDir == nil {
		t.Errorf("--webhook-cert-dir=%q mounts %+v, want an emptyDir (the root file system is read-only)", dir, v)
	}
	for _, o := range objs {
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok || o.GroupVersionKind().Group == "cert-manager.io" {
			t.Errorf("%s: cert-manager in the self-signed overlay", describe(o))
		}
	}
	role := as[rbacv1.Role](t, find(t, objs, "Role", "cronjob-controller-webhook-certs"))
	if role.Namespace != cronJobNS || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"secrets"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"create", "get", "update"}) {
		t.Errorf("Role %s/%s rules %+v, want get, create and update on secrets in %s", role.Namespace, role.Name, role.Rules, cronJobNS)
	}
	cr := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "cronjob-controller-webhook-certs"))
	var resources []string
	for _, r := range cr.Rules {
		if !slices.Equal(r.Verbs, []string{"get", "list", "patch"}) {
			t.Errorf("ClusterRole %s rule %+v, want verbs get, list, patch", cr.Name, r)
		}
		resources = append(resources, r.Resources...)
	}
	slices.Sort(resources)
	if want := []string{"customresourcedefinitions", "mutatingwebhookconfigurations", "validatingwebhookconfigurations"}; !slices.Equal(resources, want) {
		t.Errorf("ClusterRole %s resources %q, want %q", cr.Name, resources, want)
	}
}

// The self-signed overlay's controller, run with deploy's rights, writes
// the Secret and sets its CA as the caBundle of both configurations and
// the CRD's conversion, refused nothing. (The API server here cannot reach
// the Service, so no CronJob is written through the webhooks.)
func TestCronJobSelfSignedOverlay_WritesTheSecretAndInjectsTheCAWithDeploysRights(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{ControllerManager: true, ControllerManagerFlags: []string{
		"--controllers=serviceaccount-controller,serviceaccount-token-controller"}})
	cs := kubernetes.NewForConfigOrDie(e.Config)
	objs := render(t, "overlays/cronjob-controller-self-signed")
	newApplier(t, e.Config).apply(t, objs)
	testwait.CRDServed(t, e.Config, cronJobCRD)
	testwait.Authorized(t, cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(cronJobNS, "cronjob-controller"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: cronJobNS, Resource: "secrets", Verb: "create"}}, true)

	d := find(t, objs, "Deployment", "cronjob-controller")
	args, _, _ := containerArgs(t, d)
	secret := flagValue(as[appsv1.Deployment](t, d).Spec.Template.Spec.Containers[0].Args, "webhook-self-signed-secret")
	// Outside a pod: a free loopback port, a directory of the test's, and
	// the namespace the pod would have.
	args = append(args, "--kubeconfig="+saKubeconfig(t, e, cronJobNS, "cronjob-controller"), "--leader-elect-namespace="+cronJobNS,
		"--webhook-bind-address=127.0.0.1:0", "--webhook-cert-dir="+t.TempDir(), "--webhook-service-namespace="+cronJobNS)
	p := start(t, "cronjob-controller", binary(t, "cronjob-controller"), nil, args...)

	sec := await.Object(t, "the self-signed Secret", cs.CoreV1().Secrets(cronJobNS), secret, func(s *corev1.Secret) bool {
		return len(s.Data["ca.crt"]) > 0
	})
	if sec.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret %s type %s, want %s", secret, sec.Type, corev1.SecretTypeTLS)
	}
	ca := sec.Data["ca.crt"]
	reg := cs.AdmissionregistrationV1()
	await.Object(t, "the mutating webhook's caBundle", reg.MutatingWebhookConfigurations(), "cronjob-controller-mutating", func(c *admissionregistrationv1.MutatingWebhookConfiguration) bool {
		return bytes.Equal(c.Webhooks[0].ClientConfig.CABundle, ca)
	})
	await.Object(t, "the validating webhook's caBundle", reg.ValidatingWebhookConfigurations(), "cronjob-controller-validating", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
		return bytes.Equal(c.Webhooks[0].ClientConfig.CABundle, ca)
	})
	ext := apiextensions.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions()
	await.Object(t, "the CRD conversion's caBundle", ext, cronJobCRD, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return c.Spec.Conversion != nil && c.Spec.Conversion.Webhook != nil && bytes.Equal(c.Spec.Conversion.Webhook.ClientConfig.CABundle, ca)
	})
	if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
		t.Errorf("the controller was refused something with deploy's rights: %s", p.stderr.All()[bad])
	}
}
