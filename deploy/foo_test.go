package deploy_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
)

const fooNS = "kloop-foo"

// fooCluster is a control plane with kube-controller-manager, podsim
// marking pods ready, and deploy/foo-controller applied.
type fooCluster struct {
	e    *testenv.Env
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	a    *applier
	objs []*unstructured.Unstructured
}

func newFooCluster(t *testing.T) *fooCluster {
	t.Helper()
	return newFooClusterFrom(t, "foo-controller")
}

// newFooClusterFrom is newFooCluster with the kustomization in dir (the
// base or an overlay of it) applied.
func newFooClusterFrom(t *testing.T, dir string) *fooCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{ControllerManager: true})
	c := &fooCluster{e: e, cs: kubernetes.NewForConfigOrDie(e.Config), dyn: dynamic.NewForConfigOrDie(e.Config), a: newApplier(t, e.Config)}
	c.objs = render(t, dir)
	c.a.apply(t, c.objs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- podsim.Run(ctx, e.Config, podsim.Options{}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("podsim: %v", err)
		}
	})
	return c
}

// startFoo runs the foo-controller binary with the args of deploy's
// Deployment, authenticated as deploy's ServiceAccount.
func (c *fooCluster) startFoo(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	args, metrics, health := containerArgs(t, find(t, c.objs, "Deployment", "foo-controller"))
	// In a pod the Leases' namespace is the ServiceAccount's, read from
	// the mounted token's directory; here it is given (for leader election
	// or sharding, whichever the args turn on).
	args = append(args, "--kubeconfig="+saKubeconfig(t, c.e, fooNS, "foo-controller"),
		"--leader-elect-namespace="+fooNS, "--shard-namespace="+fooNS)
	args = append(args, extra...)
	p := start(t, name, binary(t, "foo-controller"), nil, args...)
	p.metrics, p.health = metrics, health
	return p
}

func (c *fooCluster) createFoo(t *testing.T, ns, name, deployment string, replicas int64) {
	t.Helper()
	foo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"deploymentName": deployment, "replicas": replicas},
	}}
	if _, err := c.dyn.Resource(foosGVR).Namespace(ns).Create(t.Context(), foo, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Foo %s/%s: %v", ns, name, err)
	}
}

func replicasOf(u *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

func ownedByFoo(u *unstructured.Unstructured, foo string) bool {
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "Foo" && o.Name == foo && ptr.Deref(o.Controller, false) {
			return true
		}
	}
	return false
}

func available(u *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
	return n
}

// fooScenario is the Foo end-to-end scenario: create, status, scale, a
// deleted Deployment recreated, ErrResourceExists on a foreign Deployment.
func (c *fooCluster) fooScenario(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	c.createFoo(t, ns, "example-foo", "example-foo", 1)
	dep := waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment example-foo owned by the Foo with 1 replica", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && ownedByFoo(u, "example-foo") && replicasOf(u) == 1
	})
	waitFor(t, c.dyn, foosGVR, ns, "Foo example-foo with status.availableReplicas 1", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && available(u) == 1
	})

	if _, err := c.dyn.Resource(foosGVR).Namespace(ns).Patch(ctx, "example-foo", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment example-foo scaled to 2", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && replicasOf(u) == 2
	})
	waitFor(t, c.dyn, foosGVR, ns, "Foo example-foo with status.availableReplicas 2", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && available(u) == 2
	})

	if err := c.dyn.Resource(deploymentsGVR).Namespace(ns).Delete(ctx, "example-foo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c.dyn, deploymentsGVR, ns, "Deployment example-foo recreated after its deletion", func(u *unstructured.Unstructured) bool {
		return u.GetName() == "example-foo" && u.GetUID() != dep.GetUID() && ownedByFoo(u, "example-foo")
	})

	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foreign"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "foreign"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := c.cs.AppsV1().Deployments(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createFoo(t, ns, "intruder", "foreign", 1)
	waitFor(t, c.dyn, eventsGVR, ns, "Warning event ErrResourceExists on Foo intruder", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "involvedObject", "name")
		reason, _, _ := unstructured.NestedString(u.Object, "reason")
		typ, _, _ := unstructured.NestedString(u.Object, "type")
		return name == "intruder" && reason == "ErrResourceExists" && typ == corev1.EventTypeWarning
	})
	got, err := c.cs.AppsV1().Deployments(ns).Get(ctx, "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("the foreign Deployment was adopted: %+v", got.OwnerReferences)
	}
}

var anyForbidden = regexp.MustCompile(`(?i)forbidden`)

func TestFooController_PassesTheScenarioAsDeploysServiceAccountWithExactlyItsRights(t *testing.T) {
	c := newFooCluster(t)
	testwait.Authorized(t, c.cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(fooNS, "foo-controller"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "samplecontroller.k8s.io", Resource: "foos", Verb: "watch"}}, true)
	p := c.startFoo(t, "foo-controller")
	p.stderr.WaitFor(t, "the leader's start", regexp.MustCompile(`Became the leader`))
	ns := testenv.NewNamespace(t, c.cs, "foo-e2e")
	c.fooScenario(t, ns)
	if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
		t.Errorf("the controller was refused something with deploy's rights: %s", p.stderr.All()[bad])
	}
}

// ruleCase is one rule of a generated role, removed to see the program
// fail saying what it was refused.
type ruleCase struct {
	kind, name string // the Role or ClusterRole
	index      int
	rule       map[string]any
}

func rulesOf(t *testing.T, objs []*unstructured.Unstructured, kinds ...string) []ruleCase {
	t.Helper()
	var out []ruleCase
	for _, o := range objs {
		if !slices.Contains(kinds, o.GetKind()) {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for i, r := range rules {
			out = append(out, ruleCase{kind: o.GetKind(), name: o.GetName(), index: i, rule: r.(map[string]any)})
		}
	}
	return out
}

func (rc ruleCase) String() string {
	res, _, _ := unstructured.NestedStringSlice(rc.rule, "resources")
	verbs, _, _ := unstructured.NestedStringSlice(rc.rule, "verbs")
	return rc.kind + " " + rc.name + ": " + strings.Join(res, ",") + " " + strings.Join(verbs, ",")
}

// without returns a copy of the role in objs with rule i removed.
func without(t *testing.T, objs []*unstructured.Unstructured, rc ruleCase) *unstructured.Unstructured {
	t.Helper()
	role := find(t, objs, rc.kind, rc.name).DeepCopy()
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	rules = slices.Delete(slices.Clone(rules), rc.index, rc.index+1)
	if err := unstructured.SetNestedSlice(role.Object, rules, "rules"); err != nil {
		t.Fatal(err)
	}
	return role
}

// removeRule applies rc's role without rc's rule, waits until the API
// server refuses user what the rule granted, and restores the role when
// the test ends. roleNS is the namespace a Role's rights hold in.
func removeRule(t *testing.T, a *applier, cs kubernetes.Interface, objs []*unstructured.Unstructured, rc ruleCase, user, roleNS string) {
	t.Helper()
	res, _, _ := unstructured.NestedStringSlice(rc.rule, "resources")
	groups, _, _ := unstructured.NestedStringSlice(rc.rule, "apiGroups")
	verbs, _, _ := unstructured.NestedStringSlice(rc.rule, "verbs")
	resource, sub, _ := strings.Cut(res[0], "/")
	attrs := &authorizationv1.ResourceAttributes{Group: groups[0], Resource: resource, Subresource: sub, Verb: verbs[0]}
	if names, _, _ := unstructured.NestedStringSlice(rc.rule, "resourceNames"); len(names) > 0 {
		attrs.Name = names[0]
	}
	if rc.kind == "Role" {
		attrs.Namespace = roleNS
	}
	spec := authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs}
	a.apply(t, []*unstructured.Unstructured{without(t, objs, rc)})
	t.Cleanup(func() {
		a.apply(t, []*unstructured.Unstructured{find(t, objs, rc.kind, rc.name)})
		testwait.Authorized(t, cs, spec, true)
	})
	testwait.Authorized(t, cs, spec, false)
}

// forbiddenLine is the error a missing rule must show: one of its verbs
// refused on its resource.
func forbiddenLine(rc ruleCase) *regexp.Regexp {
	res, _, _ := unstructured.NestedStringSlice(rc.rule, "resources")
	verbs, _, _ := unstructured.NestedStringSlice(rc.rule, "verbs")
	alts := []string{}
	for _, v := range verbs {
		alts = append(alts, forbidden(v, res[0]).String())
	}
	return regexp.MustCompile(strings.Join(alts, "|"))
}

func TestFooController_WithoutAnyOneRuleFailsFastNamingTheResourceAndVerb(t *testing.T) {
	c := newFooCluster(t)
	user := saUser(fooNS, "foo-controller")
	cases := rulesOf(t, c.objs, "ClusterRole", "Role")
	var n int
	for _, rc := range cases {
		if rc.name != "foo-controller" && rc.name != "foo-controller-leader-election" {
			continue // metrics-auth and metrics-reader: see the secured-metrics test
		}
		n++
		t.Run(rc.String(), func(t *testing.T) {
			removeRule(t, c.a, c.cs, c.objs, rc, user, fooNS)
			began := time.Now()
			p := c.startFoo(t, "foo-controller")
			ns := testenv.NewNamespace(t, c.cs, "foo-rule")
			c.createFoo(t, ns, "example-foo", "example-foo", 1)
			line := p.stderr.WaitFor(t, "an error naming the refused "+rc.String(), forbiddenLine(rc))
			if took := time.Since(began); took > 30*time.Second {
				t.Errorf("the refusal was reported after %v; want it within 30s", took.Round(time.Second))
			}
			t.Logf("after %v: %s", time.Since(began).Round(time.Millisecond), line)
		})
	}
	if n != 5 {
		t.Errorf("%d rules tried, want the 4 of the ClusterRole and the 1 of the leader-election Role", n)
	}
}
