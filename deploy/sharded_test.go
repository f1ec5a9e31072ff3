package deploy_test

import (
	"regexp"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
)

var slotsActive = regexp.MustCompile(`msg="Slots active"`)

// TestFooShardedOverlay_TwoReplicasShareTheFoosWithExactlyTheOverlaysRights
// runs two replicas of the sharded overlay as its ServiceAccount, with the
// rights it grants and no more: both join the shard group (a Lease each)
// and take slots, the Foo scenario passes, Foos in further namespaces are
// all reconciled, and nothing is refused. Without the shard Leases' rule a
// replica fails saying what it was refused.
func TestFooShardedOverlay_TwoReplicasShareTheFoosWithExactlyTheOverlaysRights(t *testing.T) {
	c := newFooClusterFrom(t, "overlays/foo-controller-sharded")
	user := saUser(fooNS, "foo-controller")
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: fooNS, Group: "coordination.k8s.io", Resource: "leases", Verb: "list"}}, true)

	replicas := []*proc{c.startFoo(t, "replica-a"), c.startFoo(t, "replica-b")}
	for i, p := range replicas {
		p.stderr.WaitFor(t, "replica "+string(rune('a'+i))+" holding active slots", slotsActive)
	}
	leases, err := c.cs.CoordinationV1().Leases(fooNS).List(t.Context(), metav1.ListOptions{LabelSelector: sharding.GroupLabel + "=foo-controller"})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 2 {
		t.Errorf("%d member Leases of group foo-controller in %s, want one per replica (2)", len(leases.Items), fooNS)
	}

	c.fooScenario(t, testenv.NewNamespace(t, c.cs, "foo-sharded"))
	for i := range 4 {
		ns := testenv.NewNamespace(t, c.cs, "foo-sharded")
		name := "foo-" + string(rune('a'+i))
		c.createFoo(t, ns, name, name, 1)
		waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment "+name+" owned by its Foo", func(u *unstructured.Unstructured) bool {
			return u.GetName() == name && ownedByFoo(u, name)
		})
	}
	for _, p := range replicas {
		if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
			t.Errorf("a sharded replica was refused something with the overlay's rights: %s", p.stderr.All()[bad])
		}
	}

	var n int
	for _, rc := range rulesOf(t, c.objs, "Role") {
		if rc.name != "foo-controller-sharding" {
			continue
		}
		n++
		t.Run(rc.String(), func(t *testing.T) {
			removeRule(t, c.a, c.cs, c.objs, rc, user, fooNS)
			began := time.Now()
			p := c.startFoo(t, "replica-without-the-rule")
			line := p.stderr.WaitFor(t, "an error naming the refused "+rc.String(), forbiddenLine(rc))
			if took := time.Since(began); took > 30*time.Second {
				t.Errorf("the refusal was reported after %v; want it within 30s", took.Round(time.Second))
			}
			t.Logf("after %v: %s", time.Since(began).Round(time.Millisecond), line)
		})
	}
	if n != 1 {
		t.Errorf("%d rules of the sharding Role tried, want 1", n)
	}
}
