package deploy_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kloop-dev/kloop/testenv"
)

// TestKloopInitWebhooks_DeployRendersWiredAndApplies makes a project with
// `kloop init --webhooks` (its make generate included) and checks its
// deploy/ as `kubectl apply -k deploy` would take it: the webhook
// configurations call the project's Service in its namespace, the
// Deployment serves them with the self-signed certificate, the certificate's
// rights are bound, and the API server takes it all by server-side apply.
func TestKloopInitWebhooks_DeployRendersWiredAndApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a Go module with go mod tidy and controller-gen, and applies it on a control plane")
	}
	dir := filepath.Join(t.TempDir(), "guestbook")
	cmd := exec.CommandContext(t.Context(), binary(t, "kloop"), "init", dir,
		"--module", "example.com/guestbook", "--group", "webapp.example.com", "--kind", "Guestbook", "--webhooks")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kloop init --webhooks: %v\n%s", err, out)
	}
	objs := render(t, filepath.Join(dir, "deploy"))

	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		hooks := ofKind(objs, kind)
		if len(hooks) != 1 {
			t.Fatalf("%d %ss, want 1", len(hooks), kind)
		}
		webhooks, _, _ := unstructured.NestedSlice(hooks[0].Object, "webhooks")
		if len(webhooks) != 1 {
			t.Fatalf("%s %s has %d webhooks, want 1", kind, hooks[0].GetName(), len(webhooks))
		}
		svc, _, _ := unstructured.NestedStringMap(webhooks[0].(map[string]any), "clientConfig", "service")
		if svc["name"] != "guestbook-webhook-service" || svc["namespace"] != "guestbook" || !strings.HasSuffix(svc["path"], "-webapp-example-com-v1alpha1-guestbook") {
			t.Errorf("%s %s calls %v, want guestbook/guestbook-webhook-service at the kind's path", kind, hooks[0].GetName(), svc)
		}
	}
	find(t, objs, "Service", "guestbook-webhook-service")
	d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "guestbook"))
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--webhook-bind-address=:9443", "--webhook-self-signed-secret=guestbook-webhook-server-cert",
		"--webhook-service=guestbook-webhook-service", "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs"} {
		if !slices.Contains(args, want) {
			t.Errorf("the Deployment's args %v lack %s", args, want)
		}
	}
	role := as[rbacv1.Role](t, find(t, objs, "Role", "guestbook-webhook-certs"))
	if role.Namespace != "guestbook" || len(role.Rules) != 1 || !slices.Contains(role.Rules[0].Resources, "secrets") {
		t.Errorf("the webhook certificate Role %s/%s %v, want secrets in the namespace guestbook", role.Namespace, role.Name, role.Rules)
	}
	binding := as[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "guestbook-webhook-certs"))
	if binding.RoleRef.Name != role.Name || binding.Subjects[0].Name != "guestbook" || binding.Subjects[0].Namespace != "guestbook" {
		t.Errorf("the webhook certificate RoleBinding %+v does not bind the Role to the ServiceAccount guestbook/guestbook", binding)
	}
	find(t, objs, "ClusterRoleBinding", "guestbook-webhook-certs")

	e := testenv.StartT(t, testenv.Options{})
	newApplier(t, e.Config).apply(t, objs)
}
