package notifier

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
)

// A notifier asked to watch a resource its user may not list fails at once,
// naming the resource and the verb, instead of waiting for ever to sync.
func TestNotifier_InformerRefusedForeverFailsRunInsteadOfHoldingUpSynced(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-refused")
	if _, err := kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps-only"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "notifier-limited"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.UserConfig("notifier-limited")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	n, err := New(newApp(t, cfg, kloop.Options{Logger: logs.Logger(), Registry: reg}), Config{
		Namespace: ns,
		Resources: []string{"configmap", "secret"},
		Sinks:     []SinkConfig{{Type: SinkLog}},
	}, Options{Out: &logBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.app.Run(t.Context()) }()
	began := time.Now()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("Run still waiting 60s after start with the secrets informer refused; logs:\n%s", logs)
	}
	t.Logf("Run returned after %v: %v", time.Since(began), err)
	if !apierrors.IsForbidden(err) || !errors.Is(err, informer.ErrRefused) {
		t.Fatalf("Run = %v; want the informer's refusal (Forbidden, ErrRefused)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `cannot list resource "secrets"`) {
		t.Errorf("error does not name the verb and resource: %s", msg)
	}
	select {
	case <-n.Synced():
		t.Errorf("Synced closed although the secrets informer never synced")
	default:
	}
}
