package authtest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/internal/authtest"
	"github.com/kloop-dev/kloop/testenv"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }

func TestGet_SendsTheBearerTokenAndReturnsCodeAndBody(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sesame" {
			http.Error(w, "who?", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("in"))
	}))
	defer srv.Close()
	c := authtest.InsecureClient()
	defer c.CloseIdleConnections()
	if code, body := authtest.Get(t, c, srv.URL, "sesame"); code != 200 || body != "in" {
		t.Errorf("with the token: %d %q, want 200 in", code, body)
	}
	if code, _ := authtest.Get(t, c, srv.URL, ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", code)
	}
}

func TestServiceAccount_GivesATokenTheAPIServerAuthenticatesAsIt(t *testing.T) {
	e := controlPlane.Env(t)
	cs := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, cs, "authtest")
	token := authtest.ServiceAccount(t, cs, ns, "robot")
	tr, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + ns + ":robot"; !tr.Status.Authenticated || tr.Status.User.Username != want {
		t.Errorf("TokenReview: authenticated=%v as %q, want %q", tr.Status.Authenticated, tr.Status.User.Username, want)
	}
}
