package testwait

import (
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/testenv/await"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// CRDServed waits until the API server at cfg serves the custom resources of
// the CustomResourceDefinition called name: the CRD is Established (its
// handler has accepted the names) and, for each served version, the
// APIService the API server registers for it is Available (requests for a
// new group reach the handler only then). Until both, requests for the
// resources can fail with 404.
func CRDServed(t await.TB, cfg *rest.Config, name string) {
	t.Helper()
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd := await.Object(t, "CRD "+name+" established", ext.ApiextensionsV1().CustomResourceDefinitions(), name, CRDEstablished)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		svc := v.Name + "." + crd.Spec.Group
		await.Object(t, "APIService "+svc+" available", dyn.Resource(apiServices), svc, func(u *unstructured.Unstructured) bool {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			return slices.ContainsFunc(conds, func(c any) bool {
				m, _ := c.(map[string]any)
				return m["type"] == "Available" && m["status"] == "True"
			})
		})
	}
}

// CRDEstablished reports whether crd has the condition Established: the
// API server has accepted its names and serves its resources (a new group
// may still answer 404 for a moment; see CRDServed). A condition for
// await.Object and ctxwait.Object.
func CRDEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}
