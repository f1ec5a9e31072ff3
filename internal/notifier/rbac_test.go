package notifier

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestClusterRole_GrantsListAndWatchOnExactlyTheConfiguredResources(t *testing.T) {
	doc := `
resource:
  po: true
  ingress: true
  hpa: true
  event: true
  coreevent: true
  node: true
  deployment: true
  configmap: false
customresources:
  - group: monitoring.coreos.com
    version: v1
    resource: prometheusrules
handler:
  log: {format: text}
`
	cfg, err := ParseConfig([]byte(doc), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := ClusterRole("notifier", cfg)
	rw := []string{"list", "watch"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events", "nodes", "pods"}, Verbs: rw},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: rw},
		{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: rw},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: rw},
		{APIGroups: []string{"monitoring.coreos.com"}, Resources: []string{"prometheusrules"}, Verbs: rw},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: rw},
	}
	if got.Name != "notifier" || got.Kind != "ClusterRole" || got.APIVersion != "rbac.authorization.k8s.io/v1" {
		t.Errorf("got %s %s named %q, want a rbac.authorization.k8s.io/v1 ClusterRole named notifier", got.APIVersion, got.Kind, got.Name)
	}
	if !reflect.DeepEqual(got.Rules, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got.Rules, want)
	}
}

func TestClusterRole_CoversEveryBuiltInResourceWithItsAPIPlural(t *testing.T) {
	plurals := map[string]string{}
	for _, r := range resources {
		role := ClusterRole("x", &Config{Resources: []string{r.name}})
		if len(role.Rules) != 1 || len(role.Rules[0].Resources) != 1 {
			t.Fatalf("%s: rules %+v, want one rule for one resource", r.name, role.Rules)
		}
		plurals[r.name] = role.Rules[0].APIGroups[0] + "/" + role.Rules[0].Resources[0]
	}
	for name, want := range map[string]string{
		"ingress": "networking.k8s.io/ingresses", "hpa": "autoscaling/horizontalpodautoscalers",
		"services": "/services", "coreevent": "/events", "event": "events.k8s.io/events",
		"clusterrolebinding": "rbac.authorization.k8s.io/clusterrolebindings", "persistentvolume": "/persistentvolumes",
	} {
		if plurals[name] != want {
			t.Errorf("%s: %s, want %s", name, plurals[name], want)
		}
	}
}

func TestClusterRole_NamespacesForSilencesAndPodsLogForLogLines(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
resource: {po: true}
incidents: {loglines: 10}
silences: {times: [{from: "22:00", to: "06:00"}]}
handler: {webhook: {url: "http://h/", incidents: true}}
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := ClusterRole("notifier", cfg)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	}
	if !reflect.DeepEqual(got.Rules, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got.Rules, want)
	}
	cfg.Sinks[0].Incidents = false // log lines only go to incident sinks
	if rules := ClusterRole("notifier", cfg).Rules; len(rules) != 1 {
		t.Errorf("without an incident sink: %+v, want no pods/log", rules)
	}
}
