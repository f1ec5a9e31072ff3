package notifier

import (
	"cmp"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterRole returns the read-only ClusterRole, named name, that a
// notifier running cfg needs: list and watch on exactly the resources cfg
// watches, built-in and custom (its informers never get single objects);
// with silences, list and watch on namespaces too (their silence-until),
// and with incidents.loglines get on pods/log (a failed container's
// previous log); nothing else. `notifier config rbac` prints it; deploy/notifier's
// role.yaml is made that way from the config in deploy/notifier.
//
// It is a ClusterRole even when cfg.Namespace is set, so that one binding
// covers cluster-scoped kinds too; bind it with a RoleBinding in that
// namespace instead when cfg watches only namespaced kinds.
func ClusterRole(name string, cfg *Config) *rbacv1.ClusterRole {
	byGroup := map[string][]string{}
	add := func(group, resource string) {
		if !slices.Contains(byGroup[group], resource) {
			byGroup[group] = append(byGroup[group], resource)
		}
	}
	for _, n := range cfg.Resources {
		r, ok := lookupResource(n)
		if !ok {
			continue // ParseConfig and New reject unknown names
		}
		gv, err := schema.ParseGroupVersion(r.apiVersion)
		if err != nil {
			continue // the table's own apiVersions parse
		}
		plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(r.kind))
		add(gv.Group, plural.Resource)
	}
	for _, cr := range cfg.CustomResources {
		add(cr.Group, cr.Resource)
	}
	if cfg.Silences.Enabled {
		add("", "namespaces") // their silence-until
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{},
	}
	for _, g := range groups {
		res := byGroup[g]
		slices.SortFunc(res, cmp.Compare)
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, Verbs: []string{"list", "watch"}})
	}
	if cfg.Incidents.LogLines > 0 && slices.ContainsFunc(cfg.Sinks, func(s SinkConfig) bool { return s.Incidents }) {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}})
	}
	return role
}

// CheckpointRole returns the Role, named name, that the checkpoint of cfg
// needs when it is a ConfigMap (the default): get and update on that
// ConfigMap and create on configmaps (a create cannot be limited to a
// name), in its namespace. A namespace that is left to the pod (cfg
// watches every namespace and names none) is "system", the placeholder
// kustomize replaces with the deployment's. Nil for other checkpoints.
func CheckpointRole(name string, cfg *Config) *rbacv1.Role {
	ck := cfg.Checkpoint
	if ck.Type != "" && ck.Type != CheckpointConfigMap {
		return nil
	}
	cm := cmp.Or(ck.Name, DefaultCheckpointName)
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cmp.Or(ck.Namespace, cfg.Namespace, "system")},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		},
	}
}
