package deploy_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/internal/notifier"
	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/testenv"
)

// deployed is a control plane with one of deploy/'s bases applied.
type deployed struct {
	e    *testenv.Env
	cs   kubernetes.Interface
	a    *applier
	objs []*unstructured.Unstructured
}

func deployBase(t *testing.T, dir string) *deployed {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	d := &deployed{e: e, cs: kubernetes.NewForConfigOrDie(e.Config), a: newApplier(t, e.Config), objs: render(t, dir)}
	d.a.apply(t, d.objs)
	return d
}

func (d *deployed) pod(t *testing.T, ns, name string) {
	t.Helper()
	// No kube-controller-manager here to make the default ServiceAccount.
	_, err := d.cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Restricted, as deploy's namespaces enforce.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}}
	if _, err := d.cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindReader binds the base's metrics-reader ClusterRole to a new
// ServiceAccount and returns its token.
func (d *deployed) bindReader(t *testing.T, role string) string {
	t.Helper()
	ns := testenv.NewNamespace(t, d.cs, "monitoring")
	if _, err := d.cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Authorized(t, d.cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(ns, "prometheus"),
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}, true)
	return tokenOf(t, saKubeconfig(t, d.e, ns, "prometheus"))
}

const podwatchNS = "kloop-podwatch"

func (d *deployed) startPodwatch(t *testing.T, name string) *proc {
	t.Helper()
	args, metrics, health := containerArgs(t, find(t, d.objs, "Deployment", "podwatch"))
	args = append(args, "--kubeconfig="+saKubeconfig(t, d.e, podwatchNS, "podwatch"))
	p := start(t, name, binary(t, "podwatch"), nil, args...)
	p.metrics, p.health = metrics, health
	return p
}

func TestPodwatch_PrintsItsNamespacesPodsAsDeploysServiceAccountAndNamesTheMissingRule(t *testing.T) {
	d := deployBase(t, "podwatch")
	user := saUser(podwatchNS, "podwatch")
	testwait.Authorized(t, d.cs, authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: podwatchNS, Resource: "pods", Verb: "watch"}}, true)
	prometheus := d.bindReader(t, "podwatch-metrics-reader")

	p := d.startPodwatch(t, "podwatch")
	p.stderr.WaitFor(t, "caches synced", cachesSynced)
	other := testenv.NewNamespace(t, d.cs, "elsewhere")
	d.pod(t, other, "elsewhere")
	d.pod(t, podwatchNS, "here")
	p.stdout.WaitFor(t, "the line for pod here", regexp.MustCompile(`^Sync/Add/Update for Pod here$`))
	if slices.ContainsFunc(p.stdout.All(), func(l string) bool { return strings.Contains(l, "elsewhere") }) {
		t.Errorf("podwatch printed a pod of another namespace: %q", p.stdout.All())
	}
	if code, _ := scrape(t, "https://"+p.metrics+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("secured metrics without a token: %d, want 401", code)
	}
	if code, body := scrape(t, "https://"+p.metrics+"/metrics", prometheus); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("secured metrics with the reader's token: %d, want 200 and metrics", code)
	}
	if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
		t.Errorf("podwatch was refused something with deploy's rights: %s", p.stderr.All()[bad])
	}

	for _, rc := range rulesOf(t, d.objs, "Role") {
		t.Run(rc.String(), func(t *testing.T) {
			removeRule(t, d.a, d.cs, d.objs, rc, user, podwatchNS)
			q := d.startPodwatch(t, "podwatch-"+rc.name)
			q.stderr.WaitFor(t, "an error naming the refused "+rc.String(), forbiddenLine(rc))
		})
	}
}

const notifierNS = "kloop-notifier"

// startNotifier runs the notifier with deploy's args, its config read from
// the rendered ConfigMap (a kubelet would mount it).
func (d *deployed) startNotifier(t *testing.T, name string) *proc {
	t.Helper()
	var cm *corev1.ConfigMap
	for _, o := range ofKind(d.objs, "ConfigMap") {
		cm = as[corev1.ConfigMap](t, o)
	}
	path := filepath.Join(t.TempDir(), ".kubewatch.yaml")
	if err := os.WriteFile(path, []byte(cm.Data[".kubewatch.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	args, metrics, health := containerArgs(t, find(t, d.objs, "Deployment", "notifier"))
	for i, a := range args {
		if strings.HasPrefix(a, "--config=") {
			args[i] = "--config=" + path
		}
	}
	args = append(args, "--kubeconfig="+saKubeconfig(t, d.e, notifierNS, "notifier"))
	// The downward API's POD_NAMESPACE, as deploy's Deployment sets it.
	p := start(t, name, binary(t, "notifier"), []string{"POD_NAMESPACE=" + notifierNS}, args...)
	p.metrics, p.health = metrics, health
	return p
}

func TestNotifier_NotifiesAsDeploysServiceAccountWithItsReadOnlyRoleAndNamesTheMissingRule(t *testing.T) {
	d := deployBase(t, "notifier")
	user := saUser(notifierNS, "notifier")
	testwait.Authorized(t, d.cs, authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Resource: "pods", Verb: "watch"}}, true)

	p := d.startNotifier(t, "notifier")
	p.stderr.WaitFor(t, "the notifier synced", notifierSynced)
	ns := testenv.NewNamespace(t, d.cs, "watched")
	d.pod(t, ns, "noticed")
	p.stdout.WaitFor(t, "a notification for pod noticed", regexp.MustCompile(`noticed`))
	if code, _ := scrape(t, "https://"+p.metrics+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("secured metrics without a token: %d, want 401", code)
	}
	if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
		t.Errorf("the notifier was refused something with deploy's rights: %s", p.stderr.All()[bad])
	}

	n := 0
	for _, rc := range rulesOf(t, d.objs, "ClusterRole", "Role") {
		if rc.name != "notifier" && rc.name != "notifier-checkpoint" {
			continue
		}
		n++
		t.Run(rc.String(), func(t *testing.T) {
			removeRule(t, d.a, d.cs, d.objs, rc, user, notifierNS)
			if verbs, _, _ := unstructured.NestedStringSlice(rc.rule, "verbs"); slices.Contains(verbs, "create") {
				// Create is needed only while the checkpoint does not exist
				// yet; an earlier notifier of this test made it.
				err := d.cs.CoreV1().ConfigMaps(notifierNS).Delete(t.Context(), notifier.DefaultCheckpointName, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			q := d.startNotifier(t, "notifier-"+rc.name)
			q.stderr.WaitFor(t, "an error naming the refused "+rc.String(), forbiddenLine(rc))
		})
	}
	if n != 4 {
		t.Errorf("%d rules tried, want the ClusterRole's 2 and the checkpoint Role's 2", n)
	}
}
