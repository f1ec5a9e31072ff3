package kloop_test

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// A Foo as a cache returns it: no TypeMeta.
func cachedFoo() *v1alpha1.Foo {
	return &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", UID: "foo-uid", ResourceVersion: "7"}}
}

func TestApp_SetControllerReferenceTakesTheKindFromTheScheme(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme)})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}}
	if err := app.SetControllerReference(cachedFoo(), dep); err != nil {
		t.Fatal(err)
	}
	want := metav1.OwnerReference{APIVersion: "samplecontroller.k8s.io/v1alpha1", Kind: "Foo", Name: "foo", UID: "foo-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	if refs := dep.OwnerReferences; len(refs) != 1 || !refEqual(refs[0], want) {
		t.Fatalf("owner references %+v, want [%+v]", refs, want)
	}
	// Again, after the Foo was recreated: the one reference is updated.
	again := cachedFoo()
	again.UID = "new-uid"
	if err := app.SetControllerReference(again, dep); err != nil {
		t.Fatal(err)
	}
	if refs := dep.OwnerReferences; len(refs) != 1 || refs[0].UID != "new-uid" {
		t.Errorf("owner references after a second call %+v, want the one reference with uid new-uid", refs)
	}
}

func TestApp_SetControllerReferenceRefusesASecondControllerNamingTheFirst(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme)})
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", OwnerReferences: []metav1.OwnerReference{other}}}
	err := app.SetControllerReference(cachedFoo(), dep)
	var ac *kloop.AlreadyControlledError
	if !errors.As(err, &ac) || ac.Controller.Name != "rs" || !strings.Contains(err.Error(), "ReplicaSet rs") {
		t.Fatalf("SetControllerReference on an object another controls = %v, want an AlreadyControlledError naming ReplicaSet rs", err)
	}
	if len(dep.OwnerReferences) != 1 {
		t.Errorf("owner references %+v: a refused call changed them", dep.OwnerReferences)
	}
	// A non-controller reference is fine next to another controller.
	if err := app.SetOwnerReference(cachedFoo(), dep); err != nil || len(dep.OwnerReferences) != 2 {
		t.Errorf("SetOwnerReference = %v, references %+v; want a second, non-controller reference", err, dep.OwnerReferences)
	}
}

func TestApp_SetOwnerReferenceAddsOnceAndKeepsAControllerFlag(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme)})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "u1"}}
	for range 2 {
		if err := app.SetOwnerReference(owner, cm); err != nil {
			t.Fatal(err)
		}
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u1"}
	if refs := cm.OwnerReferences; len(refs) != 1 || !refEqual(refs[0], want) {
		t.Fatalf("owner references %+v, want [%+v]", refs, want)
	}
	if err := app.SetControllerReference(owner, cm); err != nil {
		t.Fatal(err)
	}
	if err := app.SetOwnerReference(owner, cm); err != nil {
		t.Fatal(err)
	}
	if c := metav1.GetControllerOf(cm); c == nil || c.Name != "owner" {
		t.Errorf("SetOwnerReference after SetControllerReference left controller %+v, want owner still the controller", c)
	}
}

func TestApp_OwnerReferencesFollowTheGarbageCollectorsNamespaceRules(t *testing.T) {
	app := newApp(t, kloop.Options{})
	nsOwner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "owner", UID: "u"}}
	clusterOwner := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "ns-uid"}}
	for _, tc := range []struct {
		name    string
		owner   metav1.Object
		obj     metav1.Object
		wantErr string
	}{
		{"same namespace", nsOwner, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}}, ""},
		{"cluster-scoped owner of a namespaced object", clusterOwner, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "s"}}, ""},
		{"cluster-scoped owner of a cluster-scoped object", clusterOwner, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, ""},
		{"another namespace", nsOwner, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "s"}}, "in another namespace"},
		{"namespaced owner of a cluster-scoped object", nsOwner, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, "a cluster-scoped object cannot be owned"},
		{"owner without a UID", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "new"}}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}}, "no name or UID"},
		{"owner not in the scheme", cachedFoo(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}, "does not register *v1alpha1.Foo: add its API package's AddToScheme"},
		{"owner not a runtime.Object", &metav1.ObjectMeta{Namespace: "a", Name: "m", UID: "u"}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}}, "not a runtime.Object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, set := range map[string]func(owner, obj metav1.Object) error{"SetControllerReference": app.SetControllerReference, "SetOwnerReference": app.SetOwnerReference} {
				obj := tc.obj.(runtime.Object).DeepCopyObject().(metav1.Object)
				err := set(tc.owner, obj)
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Errorf("%s = %v, want error containing %q", name, err, tc.wantErr)
				}
				if tc.wantErr != "" && len(obj.GetOwnerReferences()) != 0 {
					t.Errorf("%s failed but set %+v", name, obj.GetOwnerReferences())
				}
			}
		})
	}
}

func TestApp_ObjectReferenceNamesTheKindFromTheScheme(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme)})
	ref, err := app.ObjectReference(cachedFoo())
	want := corev1.ObjectReference{APIVersion: "samplecontroller.k8s.io/v1alpha1", Kind: "Foo", Namespace: "ns", Name: "foo", UID: "foo-uid", ResourceVersion: "7"}
	if err != nil || ref != want {
		t.Fatalf("ObjectReference = %+v, %v; want %+v", ref, err, want)
	}
	if _, err := newApp(t, kloop.Options{}).ObjectReference(cachedFoo()); err == nil || !strings.Contains(err.Error(), "AddToScheme") {
		t.Errorf("ObjectReference of a kind the scheme lacks = %v, want an error saying to add it", err)
	}
}

func refEqual(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false) &&
		ptr.Deref(a.BlockOwnerDeletion, false) == ptr.Deref(b.BlockOwnerDeletion, false)
}
