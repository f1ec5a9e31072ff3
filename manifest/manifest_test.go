package manifest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/testenv/await"
)

// crdManifest is a CRD of group install.kloop.dev with the given plural
// and kind.
func crdManifest(plural, kind string) []byte {
	return []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.install.kloop.dev
spec:
  group: install.kloop.dev
  scope: Namespaced
  names: {plural: ` + plural + `, singular: ` + strings.ToLower(kind) + `, kind: ` + kind + `, listKind: ` + kind + `List}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`)
}

func TestInstallCRD_ReturnsOnceEstablishedAndAgainForAnUpdate(t *testing.T) {
	e := controlPlane.Env(t)
	crds := apiextensions.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions()
	m := crdManifest("widgets", "Widget")
	t.Cleanup(func() { _ = crds.Delete(context.Background(), "widgets.install.kloop.dev", metav1.DeleteOptions{}) })
	for _, step := range []string{"create", "update"} {
		ctx, cancel := context.WithTimeout(t.Context(), await.Timeout)
		err := manifest.InstallCRD(ctx, e.Config, m)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got, err := crds.Get(t.Context(), "widgets.install.kloop.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !testwait.CRDEstablished(got) {
			t.Fatalf("%s: InstallCRD returned before the CRD was Established: %+v", step, got.Status.Conditions)
		}
	}
}

// A CRD whose names another CRD of the group holds is never Established:
// InstallCRD waits until its context ends and says for what.
func TestInstallCRD_FailsNamingTheCRDWhenItIsNeverEstablished(t *testing.T) {
	e := controlPlane.Env(t)
	crds := apiextensions.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions()
	for _, name := range []string{"gadgets.install.kloop.dev", "gizmos.install.kloop.dev"} {
		t.Cleanup(func() { _ = crds.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	if err := manifest.InstallCRD(t.Context(), e.Config, crdManifest("gadgets", "Gadget")); err != nil {
		t.Fatal(err)
	}
	// The kind Gadget is taken: the second CRD's names are not accepted.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	err := manifest.InstallCRD(ctx, e.Config, crdManifest("gizmos", "Gadget"))
	if err == nil {
		t.Fatal("InstallCRD returned nil for a CRD whose kind another CRD holds")
	}
	if !strings.Contains(err.Error(), "gizmos.install.kloop.dev") || !strings.Contains(err.Error(), "Established") {
		t.Errorf("error %q does not name the CRD and what was awaited", err)
	}
	if !strings.Contains(err.Error(), "NamesAccepted False") {
		t.Errorf("error %q does not carry the condition that says why (NamesAccepted)", err)
	}
	got, gerr := crds.Get(t.Context(), "gizmos.install.kloop.dev", metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if testwait.CRDEstablished(got) {
		t.Fatalf("the conflicting CRD is Established after all: %+v", got.Status.Conditions)
	}
}
