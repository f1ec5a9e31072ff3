package informer

import (
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Owner lists are found by a hash of the list and compared in full: equal
// lists share one slice (the first object's own), and a list whose hash
// finds another list is left as it is.
func TestInterner_OwnerListsAreSharedOnlyWhenEqual(t *testing.T) {
	yes := true
	list := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID(uid), Controller: &yes}}
	}
	in := newInterner()
	first := list("web-1", "u1")
	if got := in.ownerRefs(first); &got[0] != &first[0] {
		t.Fatal("a list seen first was copied, want it kept as the object's own")
	}
	if got := in.ownerRefs(list("web-1", "u1")); &got[0] != &first[0] {
		t.Error("an equal list is not shared")
	}
	if got := in.ownerRefs(list("web-2", "u2")); &got[0] == &first[0] || got[0].Name != "web-2" {
		t.Errorf("another list got %v, want its own", got)
	}
	notController := list("web-1", "u1")
	notController[0].Controller = nil
	if got := in.ownerRefs(notController); got[0].Controller != nil {
		t.Error("a list that differs only in controller got the controller's list")
	}

	// A list under the hash of another (as if they hashed alike) is not
	// that one.
	clash := list("web-3", "u3")
	in.owners[in.ownersHash(clash)] = first
	if got := in.ownerRefs(clash); &got[0] != &clash[0] {
		t.Errorf("a list whose hash finds another's got %v, want itself", got)
	}
}

// Objects share their namespace and type strings: a typed object's
// apiVersion and kind as they are, an unstructured one's through its GVK.
func TestInterner_ObjectsShareNamespaceAndTypeStrings(t *testing.T) {
	in := newInterner()
	mk := func(ns string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte(ns)), Name: "web"}}
		d.APIVersion, d.Kind = string([]byte("apps/v1")), string([]byte("Deployment"))
		return d
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	a, b, c := mk("prod"), mk("prod"), mk("dev")
	for _, o := range []*appsv1.Deployment{a, b, c} {
		in.object(o)
	}
	if !same(a.Namespace, b.Namespace) || c.Namespace != "dev" {
		t.Errorf("namespaces %q %q %q: want the two prod ones shared, dev its own", a.Namespace, b.Namespace, c.Namespace)
	}
	if !same(a.APIVersion, c.APIVersion) || !same(a.Kind, c.Kind) || a.APIVersion != "apps/v1" || a.Kind != "Deployment" {
		t.Errorf("typed objects' apiVersion and kind not shared (%q, %q)", a.APIVersion, a.Kind)
	}
	d := mk("prod")
	in.object(d)
	if !same(d.Namespace, a.Namespace) {
		t.Error("prod, seen before dev, is not shared with the first prod object")
	}

	u := &unstructured.Unstructured{}
	u.SetAPIVersion(string([]byte("apps/v1")))
	u.SetKind(string([]byte("Deployment")))
	u.SetNamespace(string([]byte("prod")))
	in.object(u)
	if gvk := u.GroupVersionKind(); gvk.Group != "apps" || gvk.Version != "v1" || gvk.Kind != "Deployment" || !same(u.GetKind(), a.Kind) {
		t.Errorf("unstructured object's type %v (kind shared: %v), want apps/v1 Deployment, kind shared", gvk, same(u.GetKind(), a.Kind))
	}
	if !same(u.GetNamespace(), a.Namespace) {
		t.Error("unstructured object's namespace not shared")
	}
}
