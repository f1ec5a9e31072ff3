package deploy_test

import (
	"cmp"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/internal/notifier"
	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/testenv"
)

// handlers are kubewatch's ten, as its chart's values name them.
var handlers = []string{"slack", "slackwebhook", "hipchat", "mattermost", "flock", "msteams", "webhook", "cloudevent", "lark", "smtp"}

// handlerValues are the values a kubewatch user writes to send to one
// handler (the receivers' addresses on loopback; slack's apiurl is the
// notifier's own key for a Slack-compatible server), with kubewatch's
// default slack turned off unless it is the one.
func handlerValues(h, httpURL, smtpAddr string) map[string]any {
	vals := map[string]any{
		"slack":            map[string]any{"enabled": false},
		"resourcesToWatch": map[string]any{"pod": true, "deployment": false, "event": false},
	}
	var v map[string]any
	switch h {
	case "slack":
		v = map[string]any{"token": "xoxb-1", "channel": "C1", "apiurl": httpURL + "/slack/"}
	case "slackwebhook":
		v = map[string]any{"channel": "#k8s", "username": "kw", "slackwebhookurl": httpURL + "/slackwebhook"}
	case "hipchat":
		v = map[string]any{"room": "ops", "token": "hc-token", "url": httpURL + "/hipchat"}
	case "mattermost":
		v = map[string]any{"channel": "ops", "username": "kw", "url": httpURL + "/mattermost"}
	case "flock", "webhook", "cloudevent":
		v = map[string]any{"url": httpURL + "/" + h}
	case "msteams", "lark":
		v = map[string]any{"webhookurl": httpURL + "/" + h}
	case "smtp":
		v = map[string]any{"to": "ops@example.com", "from": "kw@example.com", "smarthost": smtpAddr}
	}
	v["enabled"] = true
	vals[h] = v
	return vals
}

// keyPaths lists the paths of a values tree down to its leaves (lists and
// empty maps are leaves).
func keyPaths(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		p := prefix + k
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, keyPaths(p+".", sub)...)
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func TestNotifierChart_TakesEveryKeyOfKubewatchsValues(t *testing.T) {
	ours := map[string]bool{} // every path and its prefixes
	for _, p := range keyPaths("", loadChart(t, notifierChart).Values) {
		for i, c := range p {
			if c == '.' {
				ours[p[:i]] = true
			}
		}
		ours[p] = true
	}
	theirs := keyPaths("", valuesFile(t, filepath.Join(kubewatchChart, "values.yaml")))
	if len(theirs) < 100 {
		t.Fatalf("%d keys in kubewatch's values.yaml: not the chart's file", len(theirs))
	}
	for _, p := range theirs {
		if !ours[p] {
			t.Errorf("kubewatch's values key %s is not in the notifier chart's values.yaml", p)
		}
	}
}

// chartCases are the values files the chart is tried with: its own
// defaults, kubewatch's chart's values.yaml as it is, and each handler's.
func chartCases(t *testing.T, httpURL, smtpAddr string) map[string]map[string]any {
	cases := map[string]map[string]any{
		"defaults":                nil,
		"kubewatch's values.yaml": valuesFile(t, filepath.Join(kubewatchChart, "values.yaml")),
	}
	for _, h := range handlers {
		cases[h] = handlerValues(h, httpURL, smtpAddr)
	}
	return cases
}

// checkChartObjects checks what the chart rendered for vals in ns: a
// config the notifier takes with the handler on, RBAC that is exactly
// what that config needs, a hardened Deployment running the notifier's
// image as the chart's ServiceAccount, and no credentials in a ConfigMap.
func checkChartObjects(t *testing.T, objs []*unstructured.Unstructured, ns, handler string, rbac bool) *notifier.Config {
	t.Helper()
	cfg, err := notifier.ParseConfig(configOf(t, objs), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the chart's .kubewatch.yaml: %v\n%s", err, configOf(t, objs))
	}
	var sinks []string
	for _, s := range cfg.Sinks {
		sinks = append(sinks, s.Type)
	}
	if !slices.Equal(sinks, []string{handler}) {
		t.Errorf("the config sends to %q, want %s only", sinks, handler)
	}
	if cms := ofKind(objs, "ConfigMap"); len(cms) > 0 {
		t.Errorf("%s rendered: the config holds credentials, and goes in a Secret", describe(cms[0]))
	}

	d := as[appsv1.Deployment](t, find(t, objs, "Deployment", ofKind(objs, "Deployment")[0].GetName()))
	ps := d.Spec.Template.Spec
	c := ps.Containers[0]
	if !strings.HasPrefix(c.Image, "kloop.local/notifier:") {
		t.Errorf("image %q, want the notifier's", c.Image)
	}
	if ps.SecurityContext == nil || !ptr.Deref(ps.SecurityContext.RunAsNonRoot, false) || ps.SecurityContext.SeccompProfile == nil ||
		ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", ps.SecurityContext)
	}
	if sc := c.SecurityContext; sc == nil || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root and no capabilities", sc)
	}
	if st := d.Spec.Strategy; d.Spec.Replicas != nil && *d.Spec.Replicas == 1 &&
		(st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate == nil || st.RollingUpdate.MaxSurge.IntValue() != 0) {
		t.Errorf("strategy %+v: want a rolling update without surge, so that two pods never notify one change", st)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("resources %+v: want a memory limit", c.Resources)
	}
	if !slices.Contains(c.Args, "--config=/etc/notifier/.kubewatch.yaml") ||
		len(ps.Volumes) == 0 || ps.Volumes[0].Secret == nil || ps.Volumes[0].Secret.SecretName != d.Name+"-config" {
		t.Errorf("args %q, volumes %+v: want the Secret %s-config mounted and read", c.Args, ps.Volumes, d.Name)
	}
	sa := find(t, objs, "ServiceAccount", ps.ServiceAccountName)
	if sa.GetNamespace() != ns {
		t.Errorf("ServiceAccount in %q, want %q", sa.GetNamespace(), ns)
	}

	if !rbac {
		for _, k := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			if o := ofKind(objs, k); len(o) > 0 {
				t.Errorf("rbac.create is false, but %s is rendered", describe(o[0]))
			}
		}
		return cfg
	}
	role := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", d.Name))
	if want := notifier.ClusterRole(d.Name, cfg).Rules; !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("ClusterRole %s rules:\n%+v\nthe config needs exactly:\n%+v", d.Name, role.Rules, want)
	}
	ck := as[rbacv1.Role](t, find(t, objs, "Role", d.Name+"-checkpoint"))
	want := notifier.CheckpointRole(d.Name+"-checkpoint", cfg)
	if wantNS := cmp.Or(cfg.Namespace, ns); ck.Namespace != wantNS || !reflect.DeepEqual(ck.Rules, want.Rules) {
		t.Errorf("Role %s in %q, rules %+v; want in %q %+v", ck.Name, ck.Namespace, ck.Rules, wantNS, want.Rules)
	}
	for _, b := range []string{d.Name, d.Name + "-checkpoint", d.Name + "-metrics-auth"} {
		kind := "ClusterRoleBinding"
		if b == d.Name+"-checkpoint" {
			kind = "RoleBinding"
		}
		o := find(t, objs, kind, b)
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		if len(subjects) != 1 || !reflect.DeepEqual(subjects[0], map[string]any{"kind": "ServiceAccount", "name": sa.GetName(), "namespace": ns}) {
			t.Errorf("%s binds %v, want ServiceAccount %s/%s", describe(o), subjects, ns, sa.GetName())
		}
	}
	return cfg
}

func TestNotifierChart_RendersAConfigTheNotifierTakesWithExactlyTheRBACItNeeds(t *testing.T) {
	for name, vals := range chartCases(t, "http://127.0.0.1:1", "127.0.0.1:25") {
		t.Run(name, func(t *testing.T) {
			objs := helmTemplate(t, notifierChart, "kw", "monitoring", vals)
			handler, rbac := name, true
			if vals == nil || name == "kubewatch's values.yaml" {
				handler = "slack"
				rbac = name == "defaults"
			}
			checkChartObjects(t, objs, "monitoring", handler, rbac)
		})
	}
}

// Every resource key the notifier takes (kubewatch's and the notifier's
// own) gives the rule the notifier needs for it, alone and all together,
// and custom resources in one watched namespace too.
func TestNotifierChart_ClusterRoleGrantsExactlyTheWatchedKinds(t *testing.T) {
	keys := []string{
		"deployment", "replicationcontroller", "replicaset", "daemonset", "statefulset", "services", "pod", "job",
		"node", "clusterrole", "clusterrolebinding", "serviceaccount", "persistentvolume", "namespace", "secret",
		"configmap", "ingress", "hpa", "event", "coreevent",
	}
	// The chart's defaults turned off, so that each key is tried alone.
	off := map[string]any{}
	for k := range loadChart(t, notifierChart).Values["resourcesToWatch"].(map[string]any) {
		off[k] = false
	}
	all := map[string]any{}
	for _, k := range keys {
		if notifier.ResourceName(k) != k {
			t.Fatalf("%s is not a resource name of the notifier", k)
		}
		all[k] = true
	}
	webhook := handlerValues("webhook", "http://127.0.0.1:1", "")
	try := func(t *testing.T, res map[string]any, extra map[string]any) {
		vals := maps.Clone(webhook)
		watched := maps.Clone(off)
		maps.Copy(watched, res)
		vals["resourcesToWatch"] = watched
		maps.Copy(vals, extra)
		checkChartObjects(t, helmTemplate(t, notifierChart, "kw", "monitoring", vals), "monitoring", "webhook", true)
	}
	for _, k := range keys {
		t.Run(k, func(t *testing.T) { try(t, map[string]any{k: true}, nil) })
	}
	t.Run("all", func(t *testing.T) { try(t, all, nil) })
	t.Run("custom resources in one namespace", func(t *testing.T) {
		try(t, map[string]any{"pod": true, "deployment": false}, map[string]any{
			"namespaceToWatch": "team-a",
			"customresources":  []any{map[string]any{"group": "monitoring.coreos.com", "version": "v1", "resource": "prometheusrules"}},
		})
	})
}

func TestNotifierChart_ReplicasElectALeaderOnTheirOwnLease(t *testing.T) {
	vals := handlerValues("webhook", "http://127.0.0.1:1", "")
	vals["replicaCount"] = 2
	objs := helmTemplate(t, notifierChart, "kw", "monitoring", vals)
	d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "kw-notifier"))
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, a := range []string{"--leader-elect", "--leader-elect-namespace=monitoring", "--leader-elect-id=kw-notifier-leader"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %q: want %s", args, a)
		}
	}
	role := as[rbacv1.Role](t, find(t, objs, "Role", "kw-notifier-leader-election"))
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "update"}}}
	if role.Namespace != "monitoring" || !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("Role %s in %q rules %+v; want in monitoring %+v", role.Name, role.Namespace, role.Rules, want)
	}
	find(t, objs, "RoleBinding", "kw-notifier-leader-election")
	if one := helmTemplate(t, notifierChart, "kw", "monitoring", handlerValues("webhook", "http://127.0.0.1:1", "")); slices.ContainsFunc(
		as[appsv1.Deployment](t, find(t, one, "Deployment", "kw-notifier")).Spec.Template.Spec.Containers[0].Args,
		func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) {
		t.Error("one replica elects a leader")
	}
}

// chartNotifier runs the notifier as the release's pod would: the
// container's args, the config read back from the Secret the release
// applied, and the token of the release's ServiceAccount.
func chartNotifier(t *testing.T, e *testenv.Env, cs kubernetes.Interface, ns, release, name string, env ...string) *proc {
	t.Helper()
	dep, err := cs.AppsV1().Deployments(ns).Get(t.Context(), release, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's Deployment: %v", err)
	}
	secret, err := cs.CoreV1().Secrets(ns).Get(t.Context(), release+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's config: %v", err)
	}
	path := filepath.Join(t.TempDir(), ".kubewatch.yaml")
	if err := os.WriteFile(path, secret.Data[".kubewatch.yaml"], 0o600); err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	args, metrics, health := containerArgs(t, &unstructured.Unstructured{Object: obj})
	for i, a := range args {
		if strings.HasPrefix(a, "--config=") {
			args[i] = "--config=" + path
		}
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	testwait.Authorized(t, cs, authorizationv1.SubjectAccessReviewSpec{User: saUser(ns, sa),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Resource: "pods", Verb: "watch"}}, true)
	args = append(args, "--kubeconfig="+saKubeconfig(t, e, ns, sa))
	p := start(t, name, binary(t, "notifier"), append([]string{"POD_NAMESPACE=" + ns}, env...), args...)
	p.metrics, p.health = metrics, health
	p.stderr.WaitFor(t, "the notifier synced", notifierSynced)
	return p
}

// makePod creates the pod name in a new namespace.
func makePod(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ns := testenv.NewNamespace(t, cs, "watched")
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
	}}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// receive waits for a request whose body names the pod, skipping others.
func receive(t *testing.T, ch chan request, pod string) request {
	t.Helper()
	for {
		r := testwait.Receive(t, "a notification naming pod "+pod, ch)
		if strings.Contains(r.body, pod) {
			return r
		}
	}
}

func TestNotifierChart_EachHandlersValuesInstallAndTheNotifierNotifiesAsTheChartsServiceAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	cs := kubernetes.NewForConfigOrDie(e.Config)
	for _, h := range handlers {
		t.Run(h, func(t *testing.T) {
			web, mail := newReceiver(t), newSMTPReceiver(t)
			// One release per handler, each with its own cluster-wide names.
			ns := "kw-" + h
			rel := newHelm(t, e, ns).install(t, ns, notifierChart, handlerValues(h, web.URL, mail.Addr))
			if rel.Info.Status != "deployed" {
				t.Fatalf("release status %s, want deployed", rel.Info.Status)
			}
			p := chartNotifier(t, e, cs, ns, ns+"-notifier", "notifier-"+h)
			pod := "noticed-by-" + h
			makePod(t, cs, pod)
			var r request
			if h == "smtp" {
				r = receive(t, mail.got, pod)
				if r.path != "ops@example.com" {
					t.Errorf("mail to %q, want ops@example.com", r.path)
				}
			} else {
				r = receive(t, web.got, pod)
				if !strings.HasPrefix(r.path, "/"+h) {
					t.Errorf("%s's notification went to %s", h, r.path)
				}
			}
			if h == "cloudevent" && !strings.Contains(r.contentType, "cloudevents") {
				t.Errorf("cloudevent content type %q", r.contentType)
			}
			if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
				t.Errorf("the notifier was refused something with the chart's rights: %s", p.stderr.All()[bad])
			}
		})
	}
}

// With the chart's defaults (and with kubewatch's values.yaml, whose
// rbac.create is false, once the ServiceAccount is granted what `notifier
// config rbac` prints) the notifier starts and sends to Slack, kubewatch's
// default handler: through an HTTPS proxy on loopback that shows the
// target and lets nothing out.
func TestNotifierChart_DefaultValuesInstallAndTheNotifierSendsToSlack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	cs := kubernetes.NewForConfigOrDie(e.Config)
	proxy := newConnectProxy(t)
	for name, vals := range map[string]map[string]any{
		"defaults":                nil,
		"kubewatch's values.yaml": valuesFile(t, filepath.Join(kubewatchChart, "values.yaml")),
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.NewNamespace(t, cs, "kw")
			newHelm(t, e, ns).install(t, "kw", notifierChart, vals)
			if vals != nil {
				grantByHand(t, cs, ns, "kw-notifier")
			}
			// No NO_PROXY of the caller's may let it past the proxy.
			chartNotifier(t, e, cs, ns, "kw-notifier", "notifier-"+strings.Fields(name)[0],
				"HTTPS_PROXY="+proxy.URL, "https_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
			makePod(t, cs, "noticed")
			if got := testwait.Receive(t, "the notifier's connection to Slack", proxy.targets); got != "slack.com:443" {
				t.Errorf("the notifier connected to %s, want Slack's API (slack.com:443)", got)
			}
		})
	}
}

// grantByHand does what a kubewatch user with rbac.create false does: binds
// the rights the config needs (`notifier config rbac`) to the chart's
// ServiceAccount.
func grantByHand(t *testing.T, cs kubernetes.Interface, ns, release string) {
	t.Helper()
	secret, err := cs.CoreV1().Secrets(ns).Get(t.Context(), release+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := notifier.ParseConfig(secret.Data[".kubewatch.yaml"], func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: release}}
	role := notifier.ClusterRole("by-hand-"+ns, cfg)
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ck := notifier.CheckpointRole("by-hand", cfg)
	ck.Namespace = ns
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), ck, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ck.Name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ck.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A release installed from kubewatch's own chart, upgraded to this one
// with the same values file: Helm's upgrade replaces kubewatch's objects
// with the notifier's (the ConfigMap with the Secret, kubewatch's broad
// ClusterRole with the exact one), and the notifier runs from what the
// upgrade applied and notifies. With nameOverride: kubewatch the objects
// keep kubewatch's names and the Deployment is updated in place.
func TestNotifierChart_UpgradesAReleaseOfKubewatchsChartWithTheSameValuesFile(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	cs := kubernetes.NewForConfigOrDie(e.Config)
	for _, c := range []struct {
		name, release, ns string
		extra             map[string]any
		// kubewatch's and the notifier's objects' name
		before, after string
	}{
		{"new names", "kubewatch", "monitoring", nil, "kubewatch", "kubewatch-notifier"},
		{"kubewatch's names", "team-kubewatch", "team", map[string]any{"nameOverride": "kubewatch"}, "team-kubewatch", "team-kubewatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			web := newReceiver(t)
			// What a kubewatch user's file says: RBAC on, Slack off, a webhook.
			vals := map[string]any{
				"rbac":             map[string]any{"create": true},
				"slack":            map[string]any{"enabled": false},
				"webhook":          map[string]any{"enabled": true, "url": web.URL + "/webhook"},
				"resourcesToWatch": map[string]any{"pod": true, "deployment": true, "event": false},
			}
			maps.Copy(vals, c.extra)
			file := writeValues(t, vals)
			h := newHelm(t, e, c.ns)
			first := h.install(t, c.release, kubewatchChart, valuesFile(t, file))
			if first.Chart.Metadata.Name != "kubewatch" {
				t.Fatalf("installed chart %s", first.Chart.Metadata.Name)
			}
			if _, err := cs.CoreV1().ConfigMaps(c.ns).Get(t.Context(), c.before+"-config", metav1.GetOptions{}); err != nil {
				t.Fatalf("kubewatch's chart applied no ConfigMap %s-config: %v", c.before, err)
			}
			old, err := cs.AppsV1().Deployments(c.ns).Get(t.Context(), c.before, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("kubewatch's chart applied no Deployment %s: %v", c.before, err)
			}

			up := h.upgrade(t, c.release, notifierChart, valuesFile(t, file))
			if up.Version != 2 || up.Info.Status != "deployed" || up.Chart.Metadata.Name != "notifier" {
				t.Fatalf("after the upgrade: revision %d, status %s, chart %s; want revision 2 of chart notifier, deployed",
					up.Version, up.Info.Status, up.Chart.Metadata.Name)
			}
			if _, err := cs.CoreV1().ConfigMaps(c.ns).Get(t.Context(), c.before+"-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("kubewatch's ConfigMap %s-config after the upgrade: %v, want it deleted", c.before, err)
			}
			dep, err := cs.AppsV1().Deployments(c.ns).Get(t.Context(), c.before, metav1.GetOptions{})
			switch {
			case c.before != c.after && !apierrors.IsNotFound(err):
				t.Errorf("kubewatch's Deployment %s after the upgrade: %v, want it deleted", c.before, err)
			case c.before == c.after && err != nil:
				t.Errorf("Deployment %s after the upgrade: %v", c.before, err)
			case c.before == c.after:
				var names []string
				for _, ct := range dep.Spec.Template.Spec.Containers {
					names = append(names, ct.Name)
				}
				if dep.UID != old.UID || !slices.Equal(names, []string{"notifier"}) {
					t.Errorf("Deployment %s: uid %s (was %s), containers %q; want it updated in place to the notifier alone",
						dep.Name, dep.UID, old.UID, names)
				}
			}
			objs := decode(t, []byte(up.Manifest))
			cfg := checkChartObjects(t, objs, c.ns, "webhook", true)
			if got := slices.Sorted(slices.Values(cfg.Resources)); !slices.Equal(got, []string{"deployment", "pod"}) {
				t.Errorf("the upgraded config watches %q, want the values file's deployment and pod", cfg.Resources)
			}
			role, err := cs.RbacV1().ClusterRoles().Get(t.Context(), c.after, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("ClusterRole %s after the upgrade: %v", c.after, err)
			}
			if want := notifier.ClusterRole(c.after, cfg).Rules; !reflect.DeepEqual(role.Rules, want) {
				t.Errorf("ClusterRole %s on the server after the upgrade: %+v; want exactly %+v", c.after, role.Rules, want)
			}

			p := chartNotifier(t, e, cs, c.ns, c.after, "notifier-"+c.ns)
			pod := "after-the-upgrade-" + c.ns
			makePod(t, cs, pod)
			if r := receive(t, web.got, pod); r.path != "/webhook" {
				t.Errorf("notified at %s, want the values file's webhook", r.path)
			}
			if bad := slices.IndexFunc(p.stderr.All(), anyForbidden.MatchString); bad >= 0 {
				t.Errorf("the notifier was refused something with the chart's rights: %s", p.stderr.All()[bad])
			}
		})
	}
}

// `helm lint --strict` finds nothing to warn about, with the defaults and
// with kubewatch's values.yaml.
func TestNotifierChart_PassesHelmLintStrict(t *testing.T) {
	for _, vals := range []map[string]any{nil, valuesFile(t, filepath.Join(kubewatchChart, "values.yaml"))} {
		l := action.NewLint()
		l.Strict, l.Namespace = true, "monitoring"
		r := l.Run([]string{notifierChart}, vals)
		for _, m := range r.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint: %s", m)
			}
		}
		for _, err := range r.Errors {
			t.Errorf("helm lint: %v", err)
		}
		if r.TotalChartsLinted != 1 {
			t.Errorf("helm lint linted %d charts, want 1", r.TotalChartsLinted)
		}
	}
}
