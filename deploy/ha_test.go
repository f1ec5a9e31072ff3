package deploy_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/testenv"
)

var (
	becameLeader = regexp.MustCompile(`Became the leader`)
	cachesSynced = regexp.MustCompile(`Caches synced`)
	// notifierSynced: from this line on the notifier notifies changes; an
	// object made between "Caches synced" and it counts as one that was
	// there before and is not notified.
	notifierSynced = regexp.MustCompile(`Notifier synced`)
	createdDeploy  = regexp.MustCompile(`Created Deployment`)
)

func getReadyz(t *testing.T, p *proc) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + p.health + "/readyz?verbose")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func matching(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, l := range lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

func TestFooController_TwoReplicasOneLeadsTheWarmStandbyTakesOverAfterSIGKILL(t *testing.T) {
	c := newFooCluster(t)
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(fooNS, "foo-controller"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: fooNS, Group: "coordination.k8s.io", Resource: "leases", Verb: "create"}}, true)

	a := c.startFoo(t, "replica-a")
	a.stderr.WaitFor(t, "replica a leading", becameLeader)
	b := c.startFoo(t, "replica-b")
	b.stderr.WaitFor(t, "replica b's caches synced", cachesSynced)
	if code, body := getReadyz(t, b); code != http.StatusOK || !strings.Contains(body, "[+]caches ok") {
		t.Fatalf("standby /readyz: %d %s; want ready with warm caches", code, body)
	}
	if n := matching(b.stderr.All(), becameLeader); n != 0 {
		t.Fatalf("replica b leads too (%d times) while a holds the lease", n)
	}

	ns := testenv.NewNamespace(t, c.cs, "foo-ha")
	c.createFoo(t, ns, "example-foo", "example-foo", 1)
	waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment example-foo", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && ownedByFoo(u, "example-foo")
	})
	a.stderr.WaitFor(t, "the leader's Created Deployment", createdDeploy)
	if n := matching(b.stderr.All(), regexp.MustCompile(`Created Deployment|Repairing Deployment|Updating Deployment|Reconcile failed`)); n != 0 {
		t.Errorf("the standby reconciled (%d log lines)", n)
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b.stderr.WaitFor(t, "replica b taking over", becameLeader)
	took := time.Since(killed)
	bound := leaderelection.DefaultLeaseDuration + leaderelection.DefaultRetryPeriod
	t.Logf("the standby led %v after the leader's SIGKILL (bound: lease duration + retry period = %v)", took.Round(time.Millisecond), bound)
	// A second of slack for the API round trips of the take-over itself.
	if took > bound+time.Second {
		t.Errorf("take-over after %v, want within %v", took, bound)
	}

	if _, err := c.dyn.Resource(foosGVR).Namespace(ns).Patch(t.Context(), "example-foo", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment example-foo scaled to 3 by the new leader", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && replicasOf(u) == 3
	})
	if !slices.ContainsFunc(b.stderr.All(), regexp.MustCompile(`Repairing Deployment|Updating Deployment replicas`).MatchString) {
		t.Errorf("the scale was not made by replica b")
	}
}
