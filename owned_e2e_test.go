package kloop_test

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/testenv"
)

func TestHandle_DeleteControlledByDeletesWhatTheOwnerControlsExceptWhatItKeeps(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "owned")
	app, err := kloop.New(env.Config, kloop.Options{Name: "pruner", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("configmaps")})
	startApp(t, app)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-owner"}})
	if err != nil {
		t.Fatal(err)
	}
	ref := func(o *corev1.ConfigMap, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID, Controller: ptr.To(controller)}
	}
	for name, refs := range map[string][]metav1.OwnerReference{
		"old-1":          {ref(owner, true)},
		"old-2":          {ref(owner, true)},
		"kept":           {ref(owner, true)},
		"not-controlled": {ref(owner, false), ref(other, true)},
		"unowned":        nil,
	} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs}}); err != nil {
			t.Fatal(err)
		}
	}
	// The creates above are this App's: DeleteControlledBy's cached list
	// waits for them.
	n, err := cms.DeleteControlledBy(ctx, owner, "kept")
	if err != nil || n != 2 {
		t.Fatalf("DeleteControlledBy = %d, %v; want 2 deleted", n, err)
	}
	left, err := cms.List(ctx, ns, nil) // waits for the deletes
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range left {
		if cm.Name != "kube-root-ca.crt" {
			names = append(names, cache.KeyOf(cm).Name)
		}
	}
	slices.Sort(names)
	if want := []string{"kept", "not-controlled", "other-owner", "owner", "unowned"}; !slices.Equal(names, want) {
		t.Errorf("ConfigMaps left %v, want %v", names, want)
	}
	if n, err := cms.DeleteControlledBy(ctx, owner, "kept"); err != nil || n != 0 {
		t.Errorf("DeleteControlledBy again = %d, %v; want 0: nothing left to delete", n, err)
	}
}
