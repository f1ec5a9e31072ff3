package webhook

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ConvertPath is where Conversion is served, as kubebuilder's CRD
// conversion patches expect.
const ConvertPath = "/convert"

// MutatePath is the path of gvk's mutating webhook, spelled as
// controller-runtime spells it so that kubebuilder's +kubebuilder:webhook
// markers and the manifests made from them match: "/mutate-" + the group
// with dots as dashes + "-" + version + "-" + lower-case kind. The core
// group is empty: ConfigMap v1 is "/mutate--v1-configmap".
func MutatePath(gvk schema.GroupVersionKind) string { return hookPath("/mutate-", gvk) }

// ValidatePath is MutatePath's twin for the validating webhook:
// "/validate-" + group + "-" + version + "-" + kind.
func ValidatePath(gvk schema.GroupVersionKind) string { return hookPath("/validate-", gvk) }

func hookPath(prefix string, gvk schema.GroupVersionKind) string {
	return prefix + strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}
