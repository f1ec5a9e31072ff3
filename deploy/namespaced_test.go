package deploy_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kloop-dev/kloop/internal/testwait"
)

// namespacedNS is where overlays/foo-controller-namespaced runs the
// controller; it watches team-a and team-b.
const namespacedNS = "foo-team"

// startNamespacedFoo runs the foo-controller binary with the args of the
// namespaced overlay's Deployment (--namespace=team-a,team-b), as its
// ServiceAccount, which has a Role in team-a and team-b and no
// cluster-wide rights over Foos or Deployments.
func (c *fooCluster) startNamespacedFoo(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	args, metrics, health := containerArgs(t, find(t, c.objs, "Deployment", "foo-controller"))
	args = append(args, "--kubeconfig="+saKubeconfig(t, c.e, namespacedNS, "foo-controller"), "--leader-elect-namespace="+namespacedNS)
	args = append(args, extra...)
	p := start(t, name, binary(t, "foo-controller"), nil, args...)
	p.metrics, p.health = metrics, health
	return p
}

func TestFooNamespacedOverlay_FoosInItsNamespacesConvergeAndOthersAreNotSeen(t *testing.T) {
	c := newFooClusterFrom(t, "overlays/foo-controller-namespaced")
	user := saUser(namespacedNS, "foo-controller")
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-b", Group: "samplecontroller.k8s.io", Resource: "foos", Verb: "watch"}}, true)
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "samplecontroller.k8s.io", Resource: "foos", Verb: "list"}}, false)
	if _, err := c.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Foo in a namespace the controller does not watch, first, so that
	// it would be reconciled before the others if it were seen.
	c.createFoo(t, "team-c", "unseen", "unseen", 1)

	p := c.startNamespacedFoo(t, "foo-controller")
	p.stderr.WaitFor(t, "the leader's start", becameLeader)
	for _, ns := range []string{"team-a", "team-b"} {
		c.createFoo(t, ns, "example-foo", "example-foo-"+ns, 1)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment example-foo-"+ns+" owned by the Foo", func(u *unstructured.Unstructured) bool {
			return u.GetName() == "example-foo-"+ns && ownedByFoo(u, "example-foo")
		})
		waitFor(t, c.dyn, foosGVR, ns, "Foo example-foo in "+ns+" with status.availableReplicas 1", func(u *unstructured.Unstructured) bool {
			return u.GetName() == "example-foo" && available(u) == 1
		})
	}

	deps, err := c.cs.AppsV1().Deployments("team-c").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 0 {
		t.Errorf("team-c has Deployment %s: the controller reconciled a Foo outside its namespaces", deps.Items[0].Name)
	}
	logs := p.stderr.All()
	if bad := slices.IndexFunc(logs, anyForbidden.MatchString); bad >= 0 {
		t.Errorf("the controller was refused something with its Roles: %s", logs[bad])
	}
	if bad := slices.IndexFunc(logs, func(l string) bool { return strings.Contains(l, "team-c") || strings.Contains(l, "unseen") }); bad >= 0 {
		t.Errorf("the controller saw team-c: %s", logs[bad])
	}
	code, body := getReadyz(t, p)
	if code != http.StatusOK || !strings.Contains(body, "namespaces team-a,team-b: every one served") {
		t.Errorf("/readyz?verbose: %d %s; want ready, every namespace served", code, body)
	}
}

func TestFooNamespacedOverlay_ANamespaceItMayNotListIsNamedWhileTheOthersConverge(t *testing.T) {
	c := newFooClusterFrom(t, "overlays/foo-controller-namespaced")
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(namespacedNS, "foo-controller"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-a", Group: "samplecontroller.k8s.io", Resource: "foos", Verb: "watch"}}, true)

	// "nowhere" does not exist, so it has no Role for the controller: it
	// is refused there.
	p := c.startNamespacedFoo(t, "foo-controller", "--namespace=nowhere")
	p.stderr.WaitFor(t, "the log naming the namespace it may not list", regexp.MustCompile(`namespace left out.*namespace=nowhere.*forbidden`))
	p.stderr.WaitFor(t, "the leader's start", becameLeader)
	c.createFoo(t, "team-a", "example-foo", "example-foo", 1)
	waitFor(t, c.dyn, deploymentsGVR, "team-a", "Deployment example-foo owned by the Foo", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && ownedByFoo(u, "example-foo")
	})

	code, body := getReadyz(t, p)
	if code != http.StatusOK {
		t.Errorf("/readyz: %d %s; want ready: the other namespaces are served", code, body)
	}
	if !regexp.MustCompile(`foos\.v1alpha1\.samplecontroller\.k8s\.io \[namespace=nowhere,team-a,team-b\]: namespace nowhere: .*forbidden`).MatchString(body) {
		t.Errorf("/readyz?verbose does not name namespace nowhere and why:\n%s", body)
	}
	if strings.Contains(body, "namespace team-a:") || strings.Contains(body, "namespace team-b:") {
		t.Errorf("/readyz?verbose names a namespace that is served:\n%s", body)
	}
}
