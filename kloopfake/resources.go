package kloopfake

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one resource the Server serves beyond what it infers
// from the scheme, or overrides what it infers: a custom resource's plural
// name, scope and subresources, as its CRD would say.
type Resource struct {
	// Kind is the resource's kind; the scheme must register it, and its
	// list type (Kind + "List"), in Kind's group and version.
	Kind schema.GroupVersionKind
	// Resource is the plural name, such as "cronjobs". Default: the
	// lower-case kind with an "s" (or "es", or "ies") appended.
	Resource string
	// ClusterScoped says the resource is not namespaced.
	ClusterScoped bool
	// NoStatusSubresource says the resource has no status subresource even
	// though its Go type has a Status field (a CRD without
	// subresources.status): Update then writes the status too, and
	// UpdateStatus is NotFound.
	NoStatusSubresource bool
}

// resource is what the server knows of one resource it serves.
type resource struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	status     bool // has a status subresource
	builtin    bool // a type of Kubernetes itself: strategic merge patches, Status on delete
}

// clusterScoped are the built-in kinds that are not namespaced; every other
// kind the scheme knows is taken to be namespaced unless a Resource says
// otherwise.
var clusterScoped = map[schema.GroupKind]bool{}

func init() {
	for group, kinds := range map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"storage.k8s.io":               {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "VolumeAttributesClass"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"node.k8s.io":                  {"RuntimeClass"},
		"networking.k8s.io":            {"IngressClass", "IPAddress", "ServiceCIDR"},
		"admissionregistration.k8s.io": {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"apiregistration.k8s.io":       {"APIService"},
		"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"resource.k8s.io":              {"DeviceClass", "ResourceSlice", "DeviceTaintRule"},
		"authentication.k8s.io":        {"TokenReview", "SelfSubjectReview"},
		"authorization.k8s.io":         {"SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview"},
		"storagemigration.k8s.io":      {"StorageVersionMigration"},
		"internal.apiserver.k8s.io":    {"StorageVersion"},
	} {
		for _, k := range kinds {
			clusterScoped[schema.GroupKind{Group: group, Kind: k}] = true
		}
	}
}

// builtinPackages are the Go packages of Kubernetes' own API types.
var builtinPackages = []string{"k8s.io/api/", "k8s.io/apiextensions-apiserver/", "k8s.io/kube-aggregator/"}

// resources is the table of what a Server serves, by resource and by
// group and version, built once from the scheme and Options.Resources.
type resources struct {
	byGVR map[schema.GroupVersionResource]*resource
	byGVK map[schema.GroupVersionKind]*resource
	byGV  map[schema.GroupVersion][]*resource
}

// newResources infers a resource for every kind of scheme that has a list
// kind and object metadata, then applies extra.
func newResources(scheme *runtime.Scheme, extra []Resource) (*resources, error) {
	rs := &resources{
		byGVR: map[schema.GroupVersionResource]*resource{},
		byGVK: map[schema.GroupVersionKind]*resource{},
		byGV:  map[schema.GroupVersion][]*resource{},
	}
	for gvk, t := range scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if _, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List")); err != nil {
			continue
		}
		if !reflect.PointerTo(t).Implements(reflect.TypeFor[metav1.Object]()) {
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		_, hasStatus := t.FieldByName("Status")
		r := &resource{
			gvr:        plural,
			gvk:        gvk,
			namespaced: !clusterScoped[gvk.GroupKind()],
			status:     hasStatus,
			builtin:    slices.ContainsFunc(builtinPackages, func(p string) bool { return strings.HasPrefix(t.PkgPath(), p) }),
		}
		rs.byGVK[gvk] = r
	}
	for _, e := range extra {
		t, ok := scheme.AllKnownTypes()[e.Kind]
		if !ok {
			return nil, fmt.Errorf("kloopfake: Resource %s: the scheme does not register kind %s: add its API package's AddToScheme to the scheme", e.Resource, e.Kind)
		}
		r := rs.byGVK[e.Kind]
		if r == nil {
			return nil, fmt.Errorf("kloopfake: Resource %s: kind %s has no list kind %sList or no object metadata in the scheme", e.Resource, e.Kind, e.Kind.Kind)
		}
		if e.Resource != "" {
			if strings.ToLower(e.Resource) != e.Resource || strings.Contains(e.Resource, "/") {
				return nil, fmt.Errorf("kloopfake: Resource %q of kind %s: a resource name is lower case, without a slash, such as %q", e.Resource, e.Kind, r.gvr.Resource)
			}
			r.gvr.Resource = e.Resource
		}
		r.namespaced = !e.ClusterScoped
		_, hasStatus := t.FieldByName("Status")
		r.status = hasStatus && !e.NoStatusSubresource
	}
	for _, r := range rs.byGVK {
		if old := rs.byGVR[r.gvr]; old != nil {
			// Two kinds guessed to one resource: keep one, by name, so the
			// choice does not depend on map order; a Resource names the other.
			if old.gvk.Kind < r.gvk.Kind {
				continue
			}
		}
		rs.byGVR[r.gvr] = r
	}
	for _, r := range rs.byGVR {
		gv := r.gvr.GroupVersion()
		rs.byGV[gv] = append(rs.byGV[gv], r)
	}
	for gv := range rs.byGV {
		slices.SortFunc(rs.byGV[gv], func(a, b *resource) int { return strings.Compare(a.gvr.Resource, b.gvr.Resource) })
	}
	return rs, nil
}

// discovery is the APIResourceList of gv, as the API server's discovery
// answers it, with a "<resource>/status" entry for each status subresource.
func (rs *resources) discovery(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	verbs := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	for _, r := range rs.byGV[gv] {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.gvr.Resource, Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: verbs,
		})
		if r.status {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.gvr.Resource + "/status", Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
	}
	return list
}

// groups lists the served groups and versions, sorted, the legacy core
// group ("") first.
func (rs *resources) groups() []schema.GroupVersion {
	var gvs []schema.GroupVersion
	for gv := range rs.byGV {
		gvs = append(gvs, gv)
	}
	slices.SortFunc(gvs, func(a, b schema.GroupVersion) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return gvs
}
