package deploy_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop/internal/notifier"
	"github.com/kloop-dev/kloop/testenv"
)

// kustomizations are every base and overlay under deploy/.
var kustomizations = []string{
	"foo-controller",
	"cronjob-controller",
	"notifier",
	"podwatch",
	"overlays/foo-controller-namespaced",
	"overlays/foo-controller-cluster-wide",
	"overlays/foo-controller-sharded",
	"overlays/cronjob-controller-cert-manager",
	"overlays/cronjob-controller-self-signed",
}

func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &v, true); err != nil {
		t.Fatalf("%s: %v", describe(u), err)
	}
	return &v
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

func TestKustomizations_RenderHardenedDeployments(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			deps := ofKind(objs, "Deployment")
			if len(deps) != 1 {
				t.Fatalf("%d Deployments, want 1", len(deps))
			}
			d := as[appsv1.Deployment](t, deps[0])
			ps := d.Spec.Template.Spec
			if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
				ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", ps.SecurityContext)
			}
			sa := find(t, objs, "ServiceAccount", ps.ServiceAccountName)
			if sa.GetNamespace() != d.Namespace {
				t.Errorf("ServiceAccount %s in %q, Deployment in %q", sa.GetName(), sa.GetNamespace(), d.Namespace)
			}
			if len(ps.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(ps.Containers))
			}
			c := ps.Containers[0]
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
				t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root file system and every capability dropped", sc)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("no %s request", r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("no %s limit", r)
				}
			}
			if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
				t.Errorf("liveness probe %+v, want GET /healthz", p)
			}
			if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
				t.Errorf("readiness probe %+v, want GET /readyz", p)
			}
			if !slices.Contains(c.Args, "--metrics-secure") {
				t.Errorf("args %q: want --metrics-secure", c.Args)
			}
			svc := find(t, objs, "Service", d.Name+"-metrics")
			if got := as[corev1.Service](t, svc); got.Spec.Ports[0].TargetPort.StrVal != "metrics" {
				t.Errorf("metrics Service targets %v, want the container's metrics port", got.Spec.Ports[0].TargetPort)
			}
			if d.Name == "foo-controller" {
				replicas, mode, other := int32(2), "--leader-elect", "--shard"
				if dir == "overlays/foo-controller-sharded" {
					replicas, mode, other = 3, "--shard", "--leader-elect"
				}
				if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas || !slices.Contains(c.Args, mode) || slices.Contains(c.Args, other) {
					t.Errorf("foo-controller: %v replicas, args %q; want %d replicas with %s and without %s", d.Spec.Replicas, c.Args, replicas, mode, other)
				}
				find(t, objs, "CustomResourceDefinition", "foos.samplecontroller.k8s.io")
			}
			if d.Name == "cronjob-controller" {
				if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || !slices.Contains(c.Args, "--leader-elect") {
					t.Errorf("cronjob-controller: %v replicas, args %q; want 2 replicas with --leader-elect", d.Spec.Replicas, c.Args)
				}
				find(t, objs, "CustomResourceDefinition", "cronjobs.batch.tutorial.kubebuilder.io")
			}
			ns := find(t, objs, "Namespace", d.Namespace)
			if ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("namespace %s labels %v: want the restricted Pod Security Standard enforced", d.Namespace, ns.GetLabels())
			}
		})
	}
}

func TestKustomizations_RBACIsLeastPrivilegeAndBindsTheServiceAccount(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			roles := map[string][]rbacv1.PolicyRule{} // kind/namespace/name
			for _, o := range objs {
				switch o.GetKind() {
				case "ClusterRole":
					roles["ClusterRole//"+o.GetName()] = as[rbacv1.ClusterRole](t, o).Rules
				case "Role":
					roles["Role/"+o.GetNamespace()+"/"+o.GetName()] = as[rbacv1.Role](t, o).Rules
				}
			}
			for key, rules := range roles {
				for _, r := range rules {
					for _, field := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.NonResourceURLs, r.ResourceNames} {
						for _, v := range field {
							// "/debug/*" is a path prefix, the one way to
							// grant the debug page's paths below /debug/.
							if strings.Contains(v, "*") && !(v == "/debug/*" && slices.Equal(r.NonResourceURLs, debugURLs)) {
								t.Errorf("%s: rule %+v has a wildcard", key, r)
							}
						}
					}
					if strings.HasPrefix(key, "Role/") && len(r.NonResourceURLs) > 0 {
						t.Errorf("%s: a Role cannot grant nonResourceURLs %v", key, r.NonResourceURLs)
					}
				}
			}
			bound := map[string]bool{}
			for _, o := range objs {
				var ref rbacv1.RoleRef
				var subjects []rbacv1.Subject
				ns := ""
				switch o.GetKind() {
				case "ClusterRoleBinding":
					b := as[rbacv1.ClusterRoleBinding](t, o)
					ref, subjects = b.RoleRef, b.Subjects
				case "RoleBinding":
					b := as[rbacv1.RoleBinding](t, o)
					ref, subjects, ns = b.RoleRef, b.Subjects, b.Namespace
				default:
					continue
				}
				key := ref.Kind + "/" + ns + "/" + ref.Name
				if ref.Kind == "ClusterRole" {
					key = "ClusterRole//" + ref.Name
				}
				if _, ok := roles[key]; !ok {
					t.Errorf("%s refers to %s, which is not rendered", describe(o), key)
				}
				bound[key] = true
				for _, s := range subjects {
					if s.Kind != rbacv1.ServiceAccountKind {
						t.Errorf("%s binds %s %s; want only the ServiceAccount", describe(o), s.Kind, s.Name)
						continue
					}
					sa := find(t, objs, "ServiceAccount", s.Name)
					if sa.GetNamespace() != s.Namespace {
						t.Errorf("%s binds ServiceAccount %s/%s, but it is rendered in %q", describe(o), s.Namespace, s.Name, sa.GetNamespace())
					}
				}
			}
			for key, rules := range roles {
				reader := len(rules) == 1 && slices.Equal(rules[0].Verbs, []string{"get"}) && len(rules[0].Resources) == 0 &&
					(slices.Equal(rules[0].NonResourceURLs, []string{"/metrics"}) || slices.Equal(rules[0].NonResourceURLs, debugURLs))
				if !bound[key] && !reader {
					t.Errorf("%s is rendered but not bound", key)
				}
				if reader && bound[key] {
					t.Errorf("%s (for scrapers) is bound to the program itself", key)
				}
			}
		})
	}
}

// debugURLs are what a reader of the debug page needs (package debug).
var debugURLs = []string{"/debug", "/debug/*"}

// TestKustomizations_DebugReaderGrantsTheDebugPageOnly checks the reader
// role of each base whose command serves the debug page: get on /debug and
// below, nothing else, bound to no one (the operator binds it).
func TestKustomizations_DebugReaderGrantsTheDebugPageOnly(t *testing.T) {
	for _, base := range []string{"foo-controller", "cronjob-controller", "podwatch"} {
		objs := render(t, base)
		role := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", base+"-debug-reader"))
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].NonResourceURLs, debugURLs) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) ||
			len(role.Rules[0].Resources) > 0 || len(role.Rules[0].APIGroups) > 0 {
			t.Errorf("%s: ClusterRole %s rules %+v; want get on %v only", base, role.Name, role.Rules, debugURLs)
		}
	}
}

// TestFooShardedOverlay_GrantsTheShardLeasesInsteadOfTheLeaderLease checks
// what the sharded overlay changes: the replicas shard instead of electing,
// the leader-election Role and its binding are gone, and a Role for the
// shard group's Leases (exactly the verbs package sharding uses) is bound
// to the controller's ServiceAccount in its namespace.
func TestFooShardedOverlay_GrantsTheShardLeasesInsteadOfTheLeaderLease(t *testing.T) {
	objs := render(t, "overlays/foo-controller-sharded")
	for _, o := range objs {
		if strings.Contains(o.GetName(), "leader-election") {
			t.Errorf("%s is rendered; the sharded replicas elect no leader", describe(o))
		}
	}
	role := as[rbacv1.Role](t, find(t, objs, "Role", "foo-controller-sharding"))
	want := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}}
	if role.Namespace != fooNS || len(role.Rules) != 1 || !reflect.DeepEqual(role.Rules[0], want) {
		t.Errorf("Role foo-controller-sharding in %q with rules %+v; want in %s exactly %+v", role.Namespace, role.Rules, fooNS, want)
	}
	b := as[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "foo-controller-sharding"))
	if b.Namespace != fooNS || b.RoleRef.Kind != "Role" || b.RoleRef.Name != role.Name || len(b.Subjects) != 1 ||
		b.Subjects[0].Name != "foo-controller" || b.Subjects[0].Namespace != fooNS {
		t.Errorf("RoleBinding foo-controller-sharding: %+v; want the Role bound to ServiceAccount %s/foo-controller", b, fooNS)
	}
	find(t, objs, "ClusterRole", "foo-controller") // the controller's own rights are the base's
}

func TestFooNamespacedOverlay_GrantsTheControllerARoleInEachWatchedNamespaceOnly(t *testing.T) {
	objs := render(t, "overlays/foo-controller-namespaced")
	for _, o := range ofKind(objs, "ClusterRole") {
		for _, r := range as[rbacv1.ClusterRole](t, o).Rules {
			for _, res := range r.Resources {
				if res != "tokenreviews" && res != "subjectaccessreviews" {
					t.Errorf("ClusterRole %s grants %s %v cluster-wide", o.GetName(), res, r.Verbs)
				}
			}
		}
	}
	base := as[rbacv1.ClusterRole](t, find(t, render(t, "foo-controller"), "ClusterRole", "foo-controller"))
	watched := []string{"team-a", "team-b"}
	var roles []string
	for _, o := range ofKind(objs, "Role") {
		if o.GetName() == "foo-controller" {
			roles = append(roles, o.GetNamespace())
			if r := as[rbacv1.Role](t, o); !reflect.DeepEqual(r.Rules, base.Rules) {
				t.Errorf("Role foo-controller in %s: rules %+v; want the generated ones %+v (run make generate)", o.GetNamespace(), r.Rules, base.Rules)
			}
		}
	}
	slices.Sort(roles)
	if !slices.Equal(roles, watched) {
		t.Errorf("Role foo-controller in %q; want one in each of %q", roles, watched)
	}
	var bound []string
	for _, o := range ofKind(objs, "RoleBinding") {
		b := as[rbacv1.RoleBinding](t, o)
		if b.Name != "foo-controller" {
			continue
		}
		bound = append(bound, b.Namespace)
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != "foo-controller" || len(b.Subjects) != 1 || b.Subjects[0].Name != "foo-controller" || b.Subjects[0].Namespace != "foo-team" {
			t.Errorf("RoleBinding foo-controller in %s: %+v; want Role foo-controller bound to ServiceAccount foo-team/foo-controller", b.Namespace, b)
		}
	}
	slices.Sort(bound)
	if !slices.Equal(bound, watched) {
		t.Errorf("RoleBinding foo-controller in %q; want one in each of %q", bound, watched)
	}
	for _, ns := range watched {
		find(t, objs, "Namespace", ns)
	}
	d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "foo-controller"))
	if d.Namespace != "foo-team" {
		t.Errorf("Deployment in %q, want foo-team", d.Namespace)
	}
	if c := d.Spec.Template.Spec.Containers[0]; !slices.Contains(c.Args, "--namespace=team-a,team-b") {
		t.Errorf("args %q: want the controller to watch team-a and team-b", c.Args)
	}
}

func TestNotifierBase_ConfigMapAndClusterRoleAgree(t *testing.T) {
	objs := render(t, "notifier")
	var cm *corev1.ConfigMap
	for _, o := range ofKind(objs, "ConfigMap") {
		if strings.HasPrefix(o.GetName(), "notifier-config") {
			cm = as[corev1.ConfigMap](t, o)
		}
	}
	if cm == nil {
		t.Fatal("no ConfigMap notifier-config")
	}
	cfg, err := notifier.ParseConfig([]byte(cm.Data[".kubewatch.yaml"]), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the ConfigMap's .kubewatch.yaml: %v", err)
	}
	role := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "notifier"))
	if want := notifier.ClusterRole("notifier", cfg).Rules; !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs)
	}) {
		t.Errorf("ClusterRole notifier: %+v\nthe config needs %+v (run make generate)", role.Rules, want)
	}
	for _, r := range role.Rules {
		if !slices.Equal(r.Verbs, []string{"list", "watch"}) {
			t.Errorf("rule %+v: want list and watch only", r)
		}
	}
	d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "notifier"))
	ps := d.Spec.Template.Spec
	var secret string
	for _, e := range ps.Containers[0].EnvFrom {
		if e.SecretRef != nil {
			secret = e.SecretRef.Name
		}
	}
	if !strings.HasPrefix(secret, "notifier-sinks") {
		t.Errorf("envFrom %+v: want the sink credentials from the Secret notifier-sinks", ps.Containers[0].EnvFrom)
	}
	find(t, objs, "Secret", secret)
	if ps.Volumes[0].ConfigMap == nil || ps.Volumes[0].ConfigMap.Name != cm.Name {
		t.Errorf("volumes %+v: want the ConfigMap %s mounted", ps.Volumes, cm.Name)
	}
}

func TestKustomizations_ApplyByServerSideApplyAndReadBack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	a := newApplier(t, e.Config)
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			// The test's API server has no cert-manager: its Issuer and
			// Certificate are checked as rendered (webhooks_test.go).
			objs := slices.DeleteFunc(render(t, dir), func(o *unstructured.Unstructured) bool {
				return o.GroupVersionKind().Group == "cert-manager.io"
			})
			a.apply(t, objs)
			for _, o := range objs {
				got := a.get(t, o)
				want := o.DeepCopy()
				unstructured.RemoveNestedField(want.Object, "metadata")
				if diff := missing(want.Object, got.Object, describe(o)); len(diff) > 0 {
					t.Errorf("read back differs from what was applied:\n%s", strings.Join(diff, "\n"))
				}
				for k, v := range o.GetLabels() {
					if got.GetLabels()[k] != v {
						t.Errorf("%s: label %s=%q, want %q", describe(o), k, got.GetLabels()[k], v)
					}
				}
			}
		})
	}
}
