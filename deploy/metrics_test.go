package deploy_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kloop-dev/kloop/internal/authtest"
	"github.com/kloop-dev/kloop/internal/testwait"
)

func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	c := authtest.InsecureClient()
	defer c.CloseIdleConnections()
	return authtest.Get(t, c, url, token)
}

// saTokenFor creates a ServiceAccount in ns and returns a token for it.
func saTokenFor(t *testing.T, c *fooCluster, ns, name string) string {
	t.Helper()
	return authtest.ServiceAccount(t, c.cs, ns, name)
}

func TestFooController_MetricsSecure401WithoutToken403WithoutRBAC200WithItPlainHTTPWithout(t *testing.T) {
	c := newFooCluster(t)
	ns := "monitoring"
	if _, err := c.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	prometheus := saTokenFor(t, c, ns, "prometheus")
	stranger := saTokenFor(t, c, ns, "stranger")
	// What deploy/foo-controller/metrics_reader_role.yaml says to do.
	if _, err := c.cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-foo-controller-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "foo-controller-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(ns, "prometheus"),
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}, true)

	p := c.startFoo(t, "foo-controller")
	p.stderr.WaitFor(t, "the leader's start", becameLeader)
	url := "https://" + p.metrics + "/metrics"
	if code, body := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %q, want 401", code, body)
	}
	if code, body := scrape(t, url, stranger); code != http.StatusForbidden {
		t.Errorf("a token without the metrics-reader binding: %d %q, want 403", code, body)
	}
	code, body := scrape(t, url, prometheus)
	if code != http.StatusOK || !strings.Contains(body, "leader_election_master_status") && !strings.Contains(body, "go_goroutines") {
		t.Errorf("the Prometheus token: %d, want 200 and metrics; body starts %.200q", code, body)
	}

	// The debug page, behind the same guard: a reader needs the
	// debug-reader ClusterRole (deploy/foo-controller/debug_reader_role.yaml);
	// the metrics reader's rights do not reach it.
	debugger := saTokenFor(t, c, ns, "debugger")
	if _, err := c.cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "debugger-foo-controller-debug"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "foo-controller-debug-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "debugger"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/debug", "/debug/api/v1/snapshot"} {
		testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(ns, "debugger"),
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}}, true)
	}
	debugAddr := freeAddr(t)
	dp := c.startFoo(t, "foo-controller-debug", "--debug-bind-address="+debugAddr)
	dp.stderr.WaitFor(t, "the debug page served", regexp.MustCompile(`msg="Serving the debug page"`))
	snapshot := "https://" + debugAddr + "/debug/api/v1/snapshot"
	if code, body := scrape(t, snapshot, ""); code != http.StatusUnauthorized {
		t.Errorf("debug snapshot, no token: %d %q, want 401", code, body)
	}
	if code, body := scrape(t, snapshot, prometheus); code != http.StatusForbidden {
		t.Errorf("debug snapshot with the metrics reader's token: %d %q, want 403", code, body)
	}
	if code, body := scrape(t, snapshot, debugger); code != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(body), "{") {
		t.Errorf("debug snapshot with the debug reader's token: %d, want 200 and JSON; body starts %.200q", code, body)
	}
	if code, body := scrape(t, "https://"+debugAddr+"/debug/", debugger); code != http.StatusOK {
		t.Errorf("debug page with the debug reader's token: %d %.200q, want 200", code, body)
	}
	if code, body := scrape(t, url, debugger); code != http.StatusForbidden {
		t.Errorf("/metrics with the debug reader's token: %d %.200q, want 403", code, body)
	}

	// Each rule of the metrics-auth ClusterRole is needed: without it a
	// scrape fails with 500 and the log names what was refused.
	for _, rc := range rulesOf(t, c.objs, "ClusterRole") {
		if rc.name != "foo-controller-metrics-auth" {
			continue
		}
		t.Run(rc.String(), func(t *testing.T) {
			removeRule(t, c.a, c.cs, c.objs, rc, saUser(fooNS, "foo-controller"), "")
			res, _, _ := unstructured.NestedStringSlice(rc.rule, "resources")
			q := c.startFoo(t, "foo-controller-"+res[0])
			q.stderr.WaitFor(t, "caches synced", cachesSynced)
			if code, body := scrape(t, "https://"+q.metrics+"/metrics", prometheus); code != http.StatusInternalServerError {
				t.Errorf("scrape: %d %q, want 500", code, body)
			}
			q.stderr.WaitFor(t, "an error naming the refused "+rc.String(), forbiddenLine(rc))
		})
	}

	// Without --metrics-secure: plain HTTP, no token asked.
	args, metrics, health := containerArgs(t, find(t, c.objs, "Deployment", "foo-controller"))
	args = slices.DeleteFunc(args, func(a string) bool { return a == "--metrics-secure" || a == "--leader-elect" })
	args = append(args, "--kubeconfig="+saKubeconfig(t, c.e, fooNS, "foo-controller"))
	plain := start(t, "foo-controller-plain", binary(t, "foo-controller"), nil, args...)
	plain.metrics, plain.health = metrics, health
	plain.stderr.WaitFor(t, "caches synced", cachesSynced)
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatalf("plain GET /metrics: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "go_goroutines") {
		t.Errorf("without --metrics-secure: %d, want 200 and metrics over plain HTTP", resp.StatusCode)
	}
}
