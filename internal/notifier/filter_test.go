package notifier

import "testing"

func TestFilter_MatchesEventTypesNamespacesLabelsAndResources(t *testing.T) {
	ev := func(typ EventType, ns, res string, labels map[string]string) *Event {
		return &Event{Type: typ, Namespace: ns, Resource: res, Labels: labels}
	}
	web := map[string]string{"app": "web", "tier": "front"}
	cases := []struct {
		name string
		fc   FilterConfig
		ev   *Event
		want bool
	}{
		{"zero filter passes all", FilterConfig{}, ev(Delete, "x", "pod", nil), true},
		{"event type in", FilterConfig{Events: []EventType{Create, Delete}}, ev(Delete, "x", "pod", nil), true},
		{"event type out", FilterConfig{Events: []EventType{Create, Delete}}, ev(Update, "x", "pod", nil), false},
		{"namespace in", FilterConfig{Namespaces: []string{"a", "b"}}, ev(Create, "b", "pod", nil), true},
		{"namespace not in", FilterConfig{Namespaces: []string{"a", "b"}}, ev(Create, "c", "pod", nil), false},
		{"cluster-scoped against a namespace list", FilterConfig{Namespaces: []string{"a"}}, ev(Create, "", "node", nil), false},
		{"excluded namespace", FilterConfig{ExcludeNamespaces: []string{"kube-system"}}, ev(Create, "kube-system", "pod", nil), false},
		{"not excluded", FilterConfig{ExcludeNamespaces: []string{"kube-system"}}, ev(Create, "web", "pod", nil), true},
		{"exclude beats include", FilterConfig{Namespaces: []string{"a"}, ExcludeNamespaces: []string{"a"}}, ev(Create, "a", "pod", nil), false},
		{"selector matches", FilterConfig{LabelSelector: "app=web,tier!=db"}, ev(Create, "a", "pod", web), true},
		{"selector does not match", FilterConfig{LabelSelector: "app=web,tier=db"}, ev(Create, "a", "pod", web), false},
		{"selector against no labels", FilterConfig{LabelSelector: "app"}, ev(Create, "a", "pod", nil), false},
		{"resource by alias", FilterConfig{Resources: []string{"po"}}, ev(Create, "a", "pod", nil), true},
		{"resource not listed", FilterConfig{Resources: []string{"cm"}}, ev(Create, "a", "pod", nil), false},
		{"custom resource plural", FilterConfig{Resources: []string{"foos"}}, ev(Create, "a", "foos", nil), true},
		// Core Secrets listed under customresources: "secrets" is also an
		// alias of the built-in secret.
		{"custom resource plural that is a built-in alias", FilterConfig{Resources: []string{"secrets"}}, ev(Create, "a", "secrets", nil), true},
		{"the built-in by that alias", FilterConfig{Resources: []string{"secrets"}}, ev(Create, "a", "secret", nil), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFilter(tc.fc)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.match(tc.ev); got != tc.want {
				t.Errorf("match = %v, want %v", got, tc.want)
			}
		})
	}
}
