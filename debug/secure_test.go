package debug_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/internal/authtest"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/metrics/secure"
	"github.com/kloop-dev/kloop/testenv"
)

// The page behind --metrics-secure's guard: TLS, a bearer token the API
// server authenticates, and get on /debug/* for its user.
func TestServer_SecuredLikeMetrics_ServesOnlyCallersTheAPIServerAuthorizes(t *testing.T) {
	e := controlPlane.Env(t)
	cs := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, cs, "debug-secure")
	role := "debug-reader-" + ns
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug", "/debug/*"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	viewer, stranger := authtest.ServiceAccount(t, cs, ns, "viewer"), authtest.ServiceAccount(t, cs, ns, "stranger")
	testwait.Authorized(t, cs, authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + ns + ":viewer",
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: debug.SnapshotPath, Verb: "get"}}, true)

	guard, err := secure.New(e.Config, secure.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := manager.New(manager.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := debug.New(m, debug.Options{Addr: "127.0.0.1:0", Wrap: guard.Wrap, TLS: guard.TLSConfig(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "the debug server's Start", srv.Start)
	testwait.Closed(t, "the debug server to bind", srv.AddrReady())
	if !strings.HasPrefix(srv.URL(debug.PagePath), "https://127.0.0.1:") {
		t.Fatalf("URL(PagePath) = %q, want https on loopback", srv.URL(debug.PagePath))
	}

	// The certificate is self-signed: the test trusts it as a scraper
	// configured with insecure_skip_verify does.
	c := authtest.InsecureClient()
	defer c.CloseIdleConnections()
	call := func(url, token string) (int, string) {
		t.Helper()
		return authtest.Get(t, c, url, token)
	}
	pprofURL := srv.URL(debug.PprofPath) + "goroutine?debug=1"
	for _, url := range []string{srv.URL(debug.PagePath), srv.URL(debug.SnapshotPath), pprofURL} {
		if code, _ := call(url, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", url, code)
		}
		if code, _ := call(url, stranger); code != http.StatusForbidden {
			t.Errorf("GET %s as a ServiceAccount without the binding: %d, want 403", url, code)
		}
	}
	if code, body := call(srv.URL(debug.PagePath), viewer); code != 200 || !strings.Contains(body, "<title>kloop</title>") {
		t.Errorf("GET the page as the viewer: %d, want 200 and the page", code)
	}
	if code, body := call(srv.URL(debug.SnapshotPath), viewer); code != 200 || !strings.Contains(body, `"version":1`) {
		t.Errorf("GET the snapshot as the viewer: %d %.200s, want 200 and the snapshot", code, body)
	}
	if code, body := call(pprofURL, viewer); code != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET the goroutine profile as the viewer: %d %.200s, want 200 and the profile", code, body)
	}
	// No plain HTTP on the secured address.
	plain := "http" + strings.TrimPrefix(srv.URL(debug.SnapshotPath), "https")
	if resp, err := http.Get(plain); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the secured page answered 200")
		}
	}
}
